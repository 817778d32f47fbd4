package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

func TestPprofOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	c, _, err := parseConfig("x", nil, env(nil), io.Discard)
	if err != nil || c.pprofListen != "" {
		t.Fatalf("pprof is on by default: %q %v", c.pprofListen, err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := servePprof(ctx, addr, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pprof answered %d", resp.StatusCode)
	}
}

func TestPprofOnUnixSocket(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "pprof.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := servePprof(ctx, "unix:"+path, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
	resp, err := client.Get("http://pprof/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pprof answered %d", resp.StatusCode)
	}
}
