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

# The all-in-one image (target "local"): pgtables in local mode, with
# Debian's PostgreSQL inside and the data in the /data volume, for those
# who use Azurite's image today. Both run as the user pgtables, not root.
#
#   docker build --target local -t pgtables-local .
#   docker run -p 127.0.0.1:10002:10002 -v pgtables-data:/data pgtables-local
#
# A bind mount instead of a volume must be writable by uid 10001.
FROM debian:bookworm-slim AS local
# Debian's postgresql package would create a cluster of its own; local
# mode makes its cluster in /data.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/pgtables.conf \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --no-create-home --home-dir /data --shell /usr/sbin/nologin pgtables \
 && mkdir /data && chown pgtables:pgtables /data && chmod 0700 /data
COPY --from=build /out/pgtables /usr/local/bin/pgtables
ENV PGTABLES_LISTEN=0.0.0.0:10002 PGTABLES_DATA_DIR=/data
VOLUME /data
EXPOSE 10002
USER pgtables:pgtables
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/pgtables", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/pgtables"]

# The default target, last: the small image of the production shape.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pgtables /usr/local/bin/pgtables
ENV PGTABLES_LISTEN=0.0.0.0:10002
EXPOSE 10002
# distroless's nonroot user (65532:65532)
USER nonroot:nonroot
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/pgtables", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/pgtables"]
