package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/pgtables/pgtables/tablecopy"
)

// copyTables runs `pgtables copy`: tables from one Table endpoint or dump
// to another.
func copyTables(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgtables copy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "source: a connection string (AccountName=...;AccountKey=...;TableEndpoint=..., or a SharedAccessSignature) or a dump directory")
	to := fs.String("to", "", "destination: a connection string or a directory to dump into")
	tables := fs.String("tables", "", "comma-separated tables to copy; empty: all (see -prefix)")
	prefix := fs.String("prefix", "", "copy the tables whose names begin with this")
	filter := fs.String("filter", "", "copy only the entities that match this $filter")
	parallel := fs.Int("parallel", 4, "tables copied at once")
	writers := fs.Int("writers", 4, "entity group transactions in flight per table (per key range)")
	ranges := fs.Int("ranges", 1, "split each table into this many ranges of PartitionKeys copied at once (not into a dump)")
	policies := fs.Bool("policies", false, "copy each table's stored access policies too")
	indexes := fs.Bool("indexes", false, "copy each table's property index definitions too, after its entities (pgtables endpoints and dumps)")
	properties := fs.Bool("service-properties", false, "copy the account's service properties (CORS, logging, metrics) too")
	rate := fs.Float64("rate", 0, "read at most this many entities per second from the source, all tables together (0: no limit)")
	verify := fs.Bool("verify", false, "after the copy, compare each table at the destination with the source, entity by entity")
	checkpoint := fs.String("checkpoint", "", "file that records progress after every page; a copy started again with it continues where it stopped")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *from == "" || *to == "" {
		return errors.New("copy: -from and -to are needed")
	}
	src, err := openSource(*from)
	if err != nil {
		return err
	}
	dst, closeDst, err := openDestination(*to)
	if err != nil {
		return err
	}
	var cp *tablecopy.Checkpoint
	if *checkpoint != "" {
		if cp, err = tablecopy.OpenCheckpoint(*checkpoint); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	start := time.Now()
	if *properties {
		if err := tablecopy.CopyServiceProperties(ctx, src, dst); err != nil {
			return errors.Join(err, closeDst())
		}
	}
	progress := &tablecopy.Progress{}
	stopShowing := showProgress(progress, stderr, log)
	results, err := tablecopy.Copy(ctx, src, dst, tablecopy.Options{
		Tables: tablecopy.ParseTables(*tables), Prefix: *prefix, Filter: *filter,
		Parallel: *parallel, Writers: *writers, Ranges: *ranges, Checkpoint: cp, Policies: *policies, Indexes: *indexes, Progress: progress, Rate: *rate, Log: log,
	})
	stopShowing()
	err = errors.Join(err, closeDst())
	var total int64
	for _, r := range results {
		total += r.Entities
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "copied %d entities of %d tables in %.1fs (%.0f entities/s)\n",
		total, len(results), elapsed.Seconds(), float64(total)/max(elapsed.Seconds(), 1e-9))
	if err != nil || !*verify {
		return err
	}
	return verifyCopy(ctx, src, *to, results, *filter, stdout)
}

// verifyCopy compares the tables a copy wrote with their source.
func verifyCopy(ctx context.Context, src tablecopy.Source, to string, results []tablecopy.TableResult, filter string, stdout io.Writer) error {
	dst, err := openSource(to)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	var tables []string
	for _, r := range results {
		tables = append(tables, r.Table)
	}
	bad := 0
	for _, c := range tablecopy.Verify(ctx, src, dst, tables, filter) {
		switch {
		case c.Err != nil:
			fmt.Fprintf(stdout, "verify %s: %v\n", c.Table, c.Err)
		case c.Equal():
			fmt.Fprintf(stdout, "verify %s: %d entities, equal (sha256 %s)\n", c.Table, c.Source, c.SourceDigest)
			continue
		default:
			fmt.Fprintf(stdout, "verify %s: source %d entities, destination %d; missing %v, extra %v, changed %v\n",
				c.Table, c.Source, c.Dest, c.Missing, c.Extra, c.Changed)
		}
		bad++
	}
	if bad > 0 {
		return fmt.Errorf("verify: %d of %d tables differ", bad, len(tables))
	}
	return nil
}

// showProgress shows a copy's progress until the function it returns is
// called: a line redrawn twice a second on a terminal, else a log line
// every 10 seconds.
func showProgress(p *tablecopy.Progress, w io.Writer, log *slog.Logger) (stop func()) {
	f, ok := w.(*os.File)
	terminal := false
	if ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			terminal = true
		}
	}
	every := 10 * time.Second
	if terminal {
		every = 500 * time.Millisecond
	}
	done, finished := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if terminal {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case <-t.C:
			}
			total, tables := p.Snapshot()
			rate := float64(total) / time.Since(start).Seconds()
			if !terminal {
				log.Info("progress", "entities", total, "per_second", int(rate), "tables", len(tables))
				continue
			}
			var line strings.Builder
			fmt.Fprintf(&line, "%d entities, %.0f/s", total, rate)
			for _, t := range tables {
				mark := ""
				if t.Done {
					mark = " done"
				}
				fmt.Fprintf(&line, " | %s %d%s", t.Table, t.Written, mark)
			}
			text := line.String()
			if len(text) > 160 {
				text = text[:157] + "..."
			}
			fmt.Fprint(w, "\r\033[K"+text)
		}
	}()
	return func() { close(done); <-finished }
}

// isConnectionString tells a connection string from a directory.
func isConnectionString(s string) bool { return strings.Contains(s, "=") }

func openSource(s string) (tablecopy.Source, error) {
	if isConnectionString(s) {
		return tablecopy.NewEndpoint(s)
	}
	return tablecopy.OpenDir(s)
}

func openDestination(s string) (tablecopy.Destination, func() error, error) {
	if isConnectionString(s) {
		e, err := tablecopy.NewEndpoint(s)
		return e, func() error { return nil }, err
	}
	d, err := tablecopy.CreateDir(s)
	if err != nil {
		return nil, nil, err
	}
	return d, d.Close, nil
}
