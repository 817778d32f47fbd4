# syntax=docker/dockerfile:1
#
# pgtables as a small image: a static binary on distroless (CA certificates
# and tzdata included, no shell), running as a non-root user.
#
#   docker build -t pgtables --build-arg VERSION=$(git describe --tags --always) .
#   docker run -p 127.0.0.1:10002:10002 -e PGTABLES_DATABASE_URL=postgres://... pgtables
#
# The image listens on 0.0.0.0:10002 and checks itself with
# `pgtables healthcheck` (GET /-/ready), since it has no curl or wget.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/pgtables ./cmd/pgtables

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pgtables /usr/local/bin/pgtables
ENV PGTABLES_LISTEN=0.0.0.0:10002
EXPOSE 10002
# distroless's nonroot user (65532:65532)
USER nonroot:nonroot
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/pgtables", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/pgtables"]
