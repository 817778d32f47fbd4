package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	s.inBackground(tableID, ix, func(ctx context.Context) error { return s.build(ctx, tableID, ix) })
}

// errInterrupted is the error of a build whose process stopped.
var errInterrupted = errors.New("the build was interrupted: the server running it stopped")

// recoverBuild ends a build that nobody runs any more (its process
// stopped): what it left is dropped and the index marked failed.
func (s *Store) recoverBuild(tableID int64, ix Index) {
	s.inBackground(tableID, ix, func(context.Context) error { return errInterrupted })
}

// inBackground runs work on index ix in a goroutine of its own, unless
// this store already runs some, and then records how it ended (endBuild).
func (s *Store) inBackground(tableID int64, ix Index, work func(context.Context) error) {
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
	if b.running[ix.Name] != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.running[ix.Name] = cancel
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		err := work(ctx)
		cancel()
		s.endBuild(context.Background(), tableID, ix, err)
		// Only now: until its end is recorded, the build is this
		// process's, though its lock went with its connection (see
		// buildRunsHere).
		b.mu.Lock()
		delete(b.running, ix.Name)
		b.mu.Unlock()
	}()
}

// buildRunsHere reports whether this process builds index name, or has
// built it and is recording how the build ended.
func (s *Store) buildRunsHere(name string) bool {
	b := &s.builds
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running[name] != nil
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

// build runs CREATE INDEX CONCURRENTLY, holding the index's build lock
// (buildKey) all along, waiting included, so that other processes can
// tell a build that runs from one whose process stopped. Then it analyzes
// entities: the planner knows the distribution of an index's expression
// only from statistics gathered after the index exists, and without them
// it may go on scanning (autovacuum analyzes a large table only after a
// tenth of it changed). On Citus, ANALYZE goes to every shard.
func (s *Store) build(ctx context.Context, tableID int64, ix Index) error {
	return s.indexDDLHolding(ctx, s.buildKey(ix.Name), indexDDL(tableID, ix.Name, ix.IndexSpec), sqlAnalyzeEntities)
}

// sqlAnalyzeEntities gathers the statistics of entities and its indexes.
const sqlAnalyzeEntities = `ANALYZE entities`

// buildKey is the advisory lock that the build of index name holds.
// Index names repeat in other schemas of the database (pgtables' tests
// run each in a schema of its own), and advisory locks are the
// database's: the search_path is in the key, so that a build never waits
// for another schema's build of the same name, which would deadlock with
// that one's CREATE INDEX CONCURRENTLY waiting for the waiting statement.
func (s *Store) buildKey(name string) int64 {
	h := sha256.Sum256([]byte("pgtables index build " + s.pool.Config().ConnConfig.RuntimeParams["search_path"] + "/" + name))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// buildOrphaned reports whether the index name, building by the catalog,
// has no build running: nobody holds its build lock. A build just
// created may not hold it yet, hence the age.
func (s *Store) buildOrphaned(ctx context.Context, ix Index) (bool, error) {
	if s.now().Sub(ix.Created) < orphanAge {
		return false, nil
	}
	var free bool
	if err := s.pool.QueryRow(ctx, sqlTryBuildLock, s.buildKey(ix.Name)).Scan(&free); err != nil {
		return false, classify(fmt.Errorf("check index build: %w", err))
	}
	return free, nil
}

// orphanAge is how old a build must be to be taken for orphaned when
// nobody holds its lock: far more than a build takes to connect, and more
// than builds queued behind each other take to reach their turn on a
// busy cluster (at 30 s, CI's Citus pass took waiting builds for orphaned
// now and then). A build whose server stopped shows as building that long.
const orphanAge = 10 * time.Minute

// sqlTryBuildLock tries a build's lock for the length of one statement.
const sqlTryBuildLock = `SELECT pg_try_advisory_xact_lock($1)`

// indexDDL runs a statement that builds or drops a property index, on a
// connection of its own: it may take minutes and cannot run in a
// transaction, and a pooled connection's settings (statement timeouts)
// are not for it. It holds indexDDLLock meanwhile, which closing the
// connection releases.
func (s *Store) indexDDL(ctx context.Context, sql string) error {
	return s.indexDDLHolding(ctx, 0, sql)
}

// indexDDLHolding is indexDDL for statements one after the other, holding
// advisory lock key too, unless 0.
func (s *Store) indexDDLHolding(ctx context.Context, key int64, sqls ...string) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return classify(fmt.Errorf("connect: %w", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		return classify(err)
	}
	if key != 0 {
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
			return classify(fmt.Errorf("lock index build: %w", err))
		}
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
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// endBuild records how the build of ix ended. A failed build leaves an
// invalid index (on Citus, on some shards): it is dropped before the index
// is marked failed. When the catalog row is gone (the index or its table
// was dropped meanwhile), so goes the index.
func (s *Store) endBuild(ctx context.Context, tableID int64, ix Index, buildErr error) {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	recorded, known := s.indexState(ctx, tableID, ix.Name)
	if errors.Is(buildErr, errInterrupted) && known && recorded != IndexBuilding {
		// Taken for orphaned as it ended: its process recorded how.
		s.buildEnded(ix.Name, nil)
		return
	}
	state, msg := IndexReady, ""
	if buildErr != nil {
		state, msg = IndexFailed, buildErr.Error()
		if err := s.indexDDL(ctx, sqlDropIndex+ix.Name); err != nil {
			msg += "; dropping what it left failed too: " + err.Error()
		}
	}
	tag, err := s.recordBuildEnd(ctx, tableID, ix.Name, state, msg)
	s.indexCache.clear() // the index is there for queries now
	if err != nil {
		s.buildEnded(ix.Name, fmt.Errorf("record build end: %w", err))
		return
	}
	if buildErr == nil && tag.RowsAffected() == 0 && s.indexGone(ctx, tableID, ix.Name) {
		// The catalog row is gone: the index or its table was dropped
		// while it was built.
		if err := s.indexDDL(ctx, sqlDropIndex+ix.Name); err != nil {
			s.buildEnded(ix.Name, fmt.Errorf("drop index of a dropped table: %w", err))
			return
		}
	}
	s.buildEnded(ix.Name, buildErr)
}

// recordBuildEnd sets the state of a build that ended, trying again until
// ctx ends: nobody else would ever record it (no one takes a build for
// orphaned before orphanAge), and the index would show as building all
// that time. On Citus the update is a distributed transaction, which a
// deadlock with another one, or a node's connection, may fail once.
func (s *Store) recordBuildEnd(ctx context.Context, tableID int64, name, state, msg string) (pgconn.CommandTag, error) {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		tag, err := s.pool.Exec(ctx, sqlSetIndexState, tableID, name, state, msg)
		if err == nil {
			return tag, nil
		}
		select {
		case <-ctx.Done():
			return tag, err
		case <-time.After(wait):
		}
	}
}

// IndexBuildObserver is an Observer that is also told how each index
// build ended (err nil: the index is ready).
type IndexBuildObserver interface {
	IndexBuildEnded(name string, err error)
}

// indexGone reports whether the catalog surely has no index name of
// table tableID.
func (s *Store) indexGone(ctx context.Context, tableID int64, name string) bool {
	state, known := s.indexState(ctx, tableID, name)
	return known && state == ""
}

// indexState returns the state the catalog records for index name of
// table tableID ("" when it has no such index), and whether it could tell.
func (s *Store) indexState(ctx context.Context, tableID int64, name string) (string, bool) {
	var state string
	err := s.pool.QueryRow(ctx, sqlIndexState, tableID, name).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", true
	case err != nil:
		return "", false
	}
	return state, true
}

func (s *Store) buildEnded(name string, err error) {
	if o, ok := s.observer().(IndexBuildObserver); ok {
		o.IndexBuildEnded(name, err)
	}
}
