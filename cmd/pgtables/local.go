package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/localpg"
)

// startLocal starts the private PostgreSQL of local mode. Without server
// binaries it fails at once with what to install: retrying cannot help.
func startLocal(ctx context.Context, cfg *config, log *slog.Logger) (*localpg.Server, error) {
	finder := localpg.Finder{BinDir: cfg.localPGBin, Path: cfg.path, Patterns: filepath.SplitList(cfg.localPGSearch)}
	if _, err := finder.Find(ctx, 0); err != nil {
		if errors.Is(err, localpg.ErrNotFound) {
			osRelease, _ := os.ReadFile("/etc/os-release")
			return nil, fmt.Errorf("no database configured and %v (looked at pg_config --bindir, PATH and the usual locations): install them (%s), or set PGTABLES_DATABASE_URL to use a running PostgreSQL, or PGTABLES_LOCAL_PG_BIN to their directory",
				err, localpg.InstallHint(runtime.GOOS, osRelease))
		}
		return nil, fmt.Errorf("local mode: %w", err)
	}
	if cfg.ephemeral {
		log.Warn("ephemeral local mode: a throwaway PostgreSQL without crash safety, removed at exit; NOT durable")
	} else {
		dir, err := filepath.Abs(cfg.dataDir)
		if err != nil {
			return nil, fmt.Errorf("data-dir: %w", err)
		}
		log.Info("local mode: no database configured, running a PostgreSQL of its own", "data_dir", dir)
	}
	srv, err := localpg.Start(ctx, localpg.Config{Dir: cfg.dataDir, Ephemeral: cfg.ephemeral, Finder: finder, Log: log})
	if err != nil {
		return nil, fmt.Errorf("local mode: %w", err)
	}
	if cfg.ephemeral {
		log.Info("PostgreSQL ready", "data_dir", srv.Dir(), "version", srv.Version())
	} else {
		log.Info("PostgreSQL ready", "version", srv.Version())
	}
	return srv, nil
}

// logEndpoints logs where clients connect: the endpoint, the connection
// string of the development account when it is served, and the console.
// An address listening on every interface is given as 127.0.0.1, which
// the SDKs treat as an emulator (not localhost, which some take for
// Cosmos DB).
func logEndpoints(log *slog.Logger, addr net.Addr, tls, devAccount, console bool) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	base := "http://" + net.JoinHostPort(host, port)
	if tls {
		base = "https://" + net.JoinHostPort(host, port)
	}
	if devAccount {
		endpoint := base + "/" + httpapi.DevAccount
		log.Info("endpoint", "url", endpoint)
		log.Info("connection string", "value", fmt.Sprintf("DefaultEndpointsProtocol=%s;AccountName=%s;AccountKey=%s;TableEndpoint=%s;",
			map[bool]string{false: "http", true: "https"}[tls], httpapi.DevAccount, httpapi.DevKey, endpoint))
	} else {
		log.Info("endpoint", "url", base+"/<account>")
	}
	if console {
		log.Info("console", "url", base+"/-/console/")
	}
}

// isTerminal reports whether w is a terminal (a character device, which
// /dev/null is too: text there is harmless).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
