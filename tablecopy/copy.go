package tablecopy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// Source is where a copy reads tables: a Table endpoint or a dump.
type Source interface {
	// Tables lists the tables whose names begin with prefix.
	Tables(ctx context.Context, prefix string) ([]string, error)
	// Page reads a page of a table's entities that match filter, in key
	// order, from a continuation token ("" first) on, and returns the
	// next page's token, "" after the last.
	Page(ctx context.Context, table, filter, token string) ([]Entity, string, error)
}

// Destination is where a copy writes tables.
type Destination interface {
	// CreateTable creates a table unless it exists.
	CreateTable(ctx context.Context, table string) error
	// Write upserts entities of one partition.
	Write(ctx context.Context, table string, entities []Entity) error
}

// Options chooses what a copy copies and how.
type Options struct {
	Tables   []string // these tables; none: every table whose name begins with Prefix
	Prefix   string
	Filter   string // a $filter each table's entities are read with; empty: all
	Parallel int    // tables copied at once (default 4)
	Writers  int    // writes in flight per table (default 4)
	Log      *slog.Logger
}

// TableResult is what a copy did to one table.
type TableResult struct {
	Table    string
	Entities int64
	Elapsed  time.Duration
	Err      error
}

// Copy copies tables from src to dst, creating them at dst. Writes are
// upserts, so a table copied again, or a copy repeated, converges to the
// source. It returns a result per table, and an error when any failed.
func Copy(ctx context.Context, src Source, dst Destination, opts Options) ([]TableResult, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.Writers <= 0 {
		opts.Writers = 4
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	tables := opts.Tables
	if len(tables) == 0 {
		var err error
		if tables, err = src.Tables(ctx, opts.Prefix); err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
	}
	results := make([]TableResult, len(tables))
	var g errgroup.Group
	g.SetLimit(opts.Parallel)
	for i, table := range tables {
		g.Go(func() error {
			start := time.Now()
			n, err := copyTable(ctx, src, dst, table, opts)
			results[i] = TableResult{Table: table, Entities: n, Elapsed: time.Since(start), Err: err}
			if err != nil {
				opts.Log.Error("copy failed", "table", table, "entities", n, "err", err)
			} else {
				opts.Log.Info("copied", "table", table, "entities", n, "seconds", time.Since(start).Seconds())
			}
			return nil
		})
	}
	_ = g.Wait()
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Table, r.Err))
		}
	}
	return results, errors.Join(errs...)
}

// copyTable copies one table: one goroutine reads its pages while others
// write the partitions of the pages read before.
func copyTable(ctx context.Context, src Source, dst Destination, table string, opts Options) (int64, error) {
	if err := dst.CreateTable(ctx, table); err != nil {
		return 0, fmt.Errorf("create table: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan []Entity, 2)
	var readErr error
	go func() {
		defer close(pages)
		token := ""
		for {
			entities, next, err := src.Page(ctx, table, opts.Filter, token)
			if err != nil {
				readErr = fmt.Errorf("read: %w", err)
				return
			}
			select {
			case pages <- entities:
			case <-ctx.Done():
				return
			}
			if next == "" {
				return
			}
			token = next
		}
	}()
	var (
		copied atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		werr   error
		slots  = make(chan struct{}, opts.Writers)
	)
	for page := range pages {
		// A page is in key order: each run of one PartitionKey is a write.
		for len(page) > 0 {
			n := 1
			for n < len(page) && page[n].PartitionKey == page[0].PartitionKey {
				n++
			}
			run := page[:n]
			page = page[n:]
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				if err := dst.Write(ctx, table, run); err != nil {
					mu.Lock()
					if werr == nil {
						werr = fmt.Errorf("write: %w", err)
						cancel()
					}
					mu.Unlock()
					return
				}
				copied.Add(int64(len(run)))
			}()
		}
	}
	wg.Wait()
	if werr != nil {
		return copied.Load(), werr
	}
	if readErr != nil {
		return copied.Load(), readErr
	}
	return copied.Load(), ctx.Err()
}

// ParseTables splits a comma-separated list of table names.
func ParseTables(list string) []string {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}
