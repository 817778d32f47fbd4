// Command pgtables serves the Azure Table Storage REST protocol from a
// PostgreSQL database.
//
//	pgtables              serve (the default)
//	pgtables migrate      apply database migrations and exit
//	pgtables healthcheck  exit 0 when the local server's /-/ready answers 200
//	pgtables index        create, list or drop property indexes
//	pgtables changes      print a table's changes as JSON lines
//	pgtables version      print the version
//
// Every setting is an environment variable with a flag twin; see
// `pgtables -h` and the README.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/pgtables/pgtables/internal/logbuf"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultGCPercent trades memory for CPU: each request allocates little
// that lives long, so the default of 100 collects more often than the
// heap's size calls for. Measured with pgtables-bench (README): peak
// resident memory stays near 100 MiB in the heaviest scenario. GOGC in
// the environment still wins.
const defaultGCPercent = 200

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "pgtables:", err)
		os.Exit(1)
	}
}

// run runs one command. Serving stops when ctx ends or on SIGINT/SIGTERM;
// a second signal kills the process at once.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "pgtables", version)
		return nil
	case "copy":
		return copyTables(ctx, args, stdout, stderr)
	case "index":
		return indexCommand(ctx, args, getenv, stdout, stderr)
	case "changes":
		return changesCommand(ctx, args, getenv, stdout, stderr)
	case "migrate", "serve", "healthcheck":
	default:
		return fmt.Errorf("unknown command %q (want serve, migrate, healthcheck, copy, index, changes or version)", cmd)
	}
	cfg, rest, err := parseConfig("pgtables "+cmd, args, getenv, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("unexpected arguments: %q", rest)
	}
	if cmd == "healthcheck" {
		return healthcheck(ctx, cfg, stdout)
	}
	// The format follows the terminal, which the batching writer below
	// hides, so it is settled on stderr itself.
	if cfg.logFormat == "" {
		cfg.logFormat = "json"
		if isTerminal(stderr) {
			cfg.logFormat = "text"
		}
	}
	// Lines go out in batches (a write per request would cost more than
	// the line), and all of them before run returns.
	logOut := logbuf.New(stderr, logbuf.DefaultDelay)
	defer logOut.Close()
	log, err := newLogger(cfg, logOut)
	if err != nil {
		return err
	}
	if cmd == "migrate" {
		return migrate(ctx, cfg, log)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// After the first signal, the next one gets the default action.
	context.AfterFunc(ctx, stop)
	// A JSON logger's access lines are written straight to its output
	// (httpapi.Config.AccessLogJSON).
	var accessJSON io.Writer
	if cfg.logFormat == "json" {
		accessJSON = logOut
	}
	return serve(ctx, cfg, log, accessJSON)
}

func newLogger(cfg *config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return nil, fmt.Errorf("log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.logFormat
	if format == "" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log-format: %q is not json or text", cfg.logFormat)
}
