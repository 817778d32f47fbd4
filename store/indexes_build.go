package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// buildState is the index builds this store runs, each in a goroutine with
// a context of its own, which DropIndex and Close cancel.
type buildState struct {
	mu      sync.Mutex
	running map[string]context.CancelFunc // by index name
	closed  bool
	wg      sync.WaitGroup
}

// cleanupTimeout bounds the statements that record a build's end and drop
// what a failed one left, which run after its context has ended.
const cleanupTimeout = time.Minute

// startBuild runs the build of ix on table id in the background.
func (s *Store) startBuild(tableID int64, ix Index) {
	b := &s.builds
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.endBuild(context.Background(), tableID, ix, errors.New("the server is shutting down"))
		return
	}
	if b.running == nil {
		b.running = map[string]context.CancelFunc{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.running[ix.Name] = cancel
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		err := s.build(ctx, tableID, ix)
		b.mu.Lock()
		delete(b.running, ix.Name)
		b.mu.Unlock()
		cancel()
		s.endBuild(context.Background(), tableID, ix, err)
	}()
}

// cancelBuild cancels this store's build of index name, if it runs one.
func (s *Store) cancelBuild(name string) {
	b := &s.builds
	b.mu.Lock()
	defer b.mu.Unlock()
	if cancel := b.running[name]; cancel != nil {
		cancel()
	}
}

// closeBuilds cancels every build and waits for them to record their end.
func (s *Store) closeBuilds() {
	b := &s.builds
	b.mu.Lock()
	b.closed = true
	for _, cancel := range b.running {
		cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// indexDDLLock is the advisory lock that the statements building and
// dropping property indexes hold: two of them on entities at once, each
// waiting for the transactions older than itself, deadlock.
const indexDDLLock = 0x7067696e64657873 // "pgindexs"

// build runs CREATE INDEX CONCURRENTLY.
func (s *Store) build(ctx context.Context, tableID int64, ix Index) error {
	return s.indexDDL(ctx, indexDDL(tableID, ix.Name, ix.IndexSpec))
}

// indexDDL runs a statement that builds or drops a property index, on a
// connection of its own: it may take minutes and cannot run in a
// transaction, and a pooled connection's settings (statement timeouts)
// are not for it. It holds indexDDLLock meanwhile, which closing the
// connection releases.
func (s *Store) indexDDL(ctx context.Context, sql string) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return classify(fmt.Errorf("connect: %w", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		return classify(err)
	}
	// Polled rather than waited for: a statement waiting for the lock
	// holds a snapshot, which the build holding it waits for in turn.
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(indexDDLLock)).Scan(&ok); err != nil {
			return classify(fmt.Errorf("wait for other index builds: %w", err))
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return classify(fmt.Errorf("wait for other index builds: %w", ctx.Err()))
		case <-time.After(wait):
		}
	}
	_, err = conn.Exec(ctx, sql)
	return err
}

// endBuild records how the build of ix ended. A failed build leaves an
// invalid index (on Citus, on some shards): it is dropped before the index
// is marked failed. When the catalog row is gone (the index or its table
// was dropped meanwhile), so goes the index.
func (s *Store) endBuild(ctx context.Context, tableID int64, ix Index, buildErr error) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	state, msg := IndexReady, ""
	if buildErr != nil {
		state, msg = IndexFailed, buildErr.Error()
		if err := s.indexDDL(ctx, sqlDropIndex+ix.Name); err != nil {
			msg += "; dropping what it left failed too: " + err.Error()
		}
	}
	tag, err := s.pool.Exec(ctx, sqlSetIndexState, tableID, ix.Name, state, msg)
	if err != nil {
		s.buildEnded(ix.Name, fmt.Errorf("record build end: %w", err))
		return
	}
	if tag.RowsAffected() == 0 && buildErr == nil {
		if err := s.indexDDL(ctx, sqlDropIndex+ix.Name); err != nil {
			s.buildEnded(ix.Name, fmt.Errorf("drop index of a dropped table: %w", err))
			return
		}
	}
	s.buildEnded(ix.Name, buildErr)
}

// IndexBuildObserver is an Observer that is also told how each index
// build ended (err nil: the index is ready).
type IndexBuildObserver interface {
	IndexBuildEnded(name string, err error)
}

func (s *Store) buildEnded(name string, err error) {
	if o, ok := s.observer().(IndexBuildObserver); ok {
		o.IndexBuildEnded(name, err)
	}
}
