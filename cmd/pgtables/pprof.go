package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"
)

// servePprof serves Go's profiles on their own listener, never on the
// protocol port, and only when asked to: profiles reveal internals and cost
// CPU while taken. An address "unix:PATH" listens on a Unix socket, for a
// machine where no further TCP port may be opened (fetch with
// curl --unix-socket PATH http://x/debug/pprof/profile).
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	network := "tcp"
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", path
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	log.Warn("serving pprof profiles", "addr", ln.Addr().String())
	go hs.Serve(ln) //nolint:errcheck // ends with ctx
	return nil
}
