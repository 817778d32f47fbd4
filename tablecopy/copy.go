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
	// Checkpoint, if set, records progress after every page written, and
	// a copy continues from it where it stopped.
	Checkpoint *Checkpoint
	// Ranges splits each table into this many ranges of PartitionKeys
	// copied at once (default 1); a dump is always written in one.
	Ranges int
	// Policies copies each table's stored access policies too.
	Policies bool
	// Indexes copies each table's property index definitions too (a
	// pgtables extension), once its entities are copied: a bulk load goes
	// faster without indexes to keep, and the builds run at the
	// destination after the copy.
	Indexes bool
	// Progress, if set, counts the entities written as they are.
	Progress *Progress
	// Rate, if set, bounds the entities read from the source per second,
	// all tables together.
	Rate float64
	Log  *slog.Logger

	limit *rateLimit
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
	opts.limit = newRateLimit(opts.Rate)
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
// write the partitions of the page read before. A page is written whole,
// and the checkpoint taken, before the next one is.
func copyTable(ctx context.Context, src Source, dst Destination, table string, opts Options) (int64, error) {
	cp := opts.Checkpoint.table(table)
	r, ordered := dst.(resumable)
	switch {
	case ordered && (cp.Token != "" || cp.Done):
		if err := r.Resume(ctx, table, cp.Mark, cp.Done); err != nil {
			return 0, fmt.Errorf("resume: %w", err)
		}
	case cp.Done:
	default:
		if err := dst.CreateTable(ctx, table); err != nil {
			return 0, fmt.Errorf("create table: %w", err)
		}
	}
	if opts.Policies {
		if err := copyPolicies(ctx, src, dst, table); err != nil {
			return 0, err
		}
	}
	n, err := copyEntities(ctx, src, dst, table, ordered, opts)
	if err == nil && opts.Indexes {
		err = copyIndexes(ctx, src, dst, table)
	}
	return n, err
}

// copyEntities copies a table's entities, in key ranges at once unless
// the destination takes them in order.
func copyEntities(ctx context.Context, src Source, dst Destination, table string, ordered bool, opts Options) (int64, error) {
	ranges := keyRanges(opts.Ranges)
	if ordered || len(ranges) == 1 {
		return copyRange(ctx, src, dst, table, table, opts.Filter, opts)
	}
	// Key ranges at once, each with its own pages, writers and checkpoint.
	var (
		g     errgroup.Group
		total atomic.Int64
	)
	for i, r := range ranges {
		filter := r
		if opts.Filter != "" {
			filter = "(" + opts.Filter + ") and (" + r + ")"
		}
		key := fmt.Sprintf("%s#%d/%d", table, i, len(ranges))
		g.Go(func() error {
			n, err := copyRange(ctx, src, dst, table, key, filter, opts)
			total.Add(n)
			return err
		})
	}
	err := g.Wait()
	return total.Load(), err
}

// keyAlphabet is where keyRanges splits the PartitionKeys: digits and
// letters, what keys made of numbers, GUIDs, base64 or words begin with.
// Keys that begin with anything else fall in the first or the last range.
const keyAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// keyRanges returns the $filter conditions of n ranges of PartitionKeys
// that together hold every key once.
func keyRanges(n int) []string {
	n = min(max(n, 1), len(keyAlphabet))
	if n == 1 {
		return []string{""}
	}
	bound := func(i int) string { return string(keyAlphabet[i*len(keyAlphabet)/n]) }
	ranges := []string{"PartitionKey lt '" + bound(1) + "'"}
	for i := 1; i < n-1; i++ {
		ranges = append(ranges, "PartitionKey ge '"+bound(i)+"' and PartitionKey lt '"+bound(i+1)+"'")
	}
	return append(ranges, "PartitionKey ge '"+bound(n-1)+"'")
}

// copyRange copies the entities of a table that filter selects, with the
// checkpoint kept under key.
func copyRange(ctx context.Context, src Source, dst Destination, table, key, filter string, opts Options) (int64, error) {
	cp := opts.Checkpoint.table(key)
	r, ordered := dst.(resumable)
	if cp.Done {
		opts.Progress.add(table, cp.Entities, true)
		return cp.Entities, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type page struct {
		entities []Entity
		next     string
	}
	pages := make(chan page, 2)
	var readErr error
	go func() {
		defer close(pages)
		token := cp.Token
		for {
			if err := opts.limit.wait(ctx); err != nil {
				return
			}
			entities, next, err := src.Page(ctx, table, filter, token)
			if err != nil {
				readErr = fmt.Errorf("read: %w", err)
				return
			}
			opts.limit.took(len(entities))
			select {
			case pages <- page{entities, next}:
			case <-ctx.Done():
				return
			}
			if next == "" {
				return
			}
			token = next
		}
	}()
	writers := opts.Writers
	if ordered {
		// A dump is written in the source's key order, one run after
		// another: a local file gains nothing from writes at once.
		writers = 1
	}
	var (
		copied atomic.Int64
		mu     sync.Mutex
		werr   error
		slots  = make(chan struct{}, writers)
	)
	copied.Store(cp.Entities)
	opts.Progress.add(table, cp.Entities, false)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if werr == nil {
			werr = err
			cancel()
		}
	}
	for p := range pages {
		var wg sync.WaitGroup
		// A page is in key order: each run of one PartitionKey is a write.
		for rest := p.entities; len(rest) > 0; {
			n := 1
			for n < len(rest) && rest[n].PartitionKey == rest[0].PartitionKey {
				n++
			}
			run := rest[:n]
			rest = rest[n:]
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				if err := dst.Write(ctx, table, run); err != nil {
					fail(fmt.Errorf("write: %w", err))
					return
				}
				copied.Add(int64(len(run)))
				opts.Progress.add(table, int64(len(run)), false)
			}()
		}
		wg.Wait()
		mu.Lock()
		failed := werr != nil
		mu.Unlock()
		if failed || opts.Checkpoint == nil {
			continue
		}
		next := tableCheckpoint{Token: p.next, Entities: copied.Load(), Done: p.next == ""}
		if ordered {
			mark, err := r.Mark(table)
			if err != nil {
				fail(err)
				continue
			}
			next.Mark = mark
		}
		if err := opts.Checkpoint.save(key, next); err != nil {
			fail(err)
		}
	}
	if werr != nil {
		return copied.Load(), werr
	}
	if readErr != nil {
		return copied.Load(), readErr
	}
	if err := ctx.Err(); err != nil {
		return copied.Load(), err
	}
	opts.Progress.add(table, 0, true)
	return copied.Load(), nil
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
