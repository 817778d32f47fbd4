package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// Tombstones oldest first, with how many there are in all; SKIP
	// LOCKED lets several replicas purge different tables at once without
	// waiting on each other.
	sqlNextTombstones = `
SELECT id, count(*) OVER () FROM tables WHERE deleted_at IS NOT NULL ORDER BY deleted_at LIMIT 100`

	sqlLockTombstone = `
SELECT deleted_at < now() - make_interval(secs => $2) FROM tables
WHERE id = $1 AND deleted_at IS NOT NULL FOR UPDATE SKIP LOCKED`

	// A chunk is a key range of the table, found and deleted by two
	// statements that the primary key serves as index ranges. The range
	// starts at the purge's cursor, the last key of the chunk before: a
	// scan from the start of the table would walk again over the index
	// entries of every row purged so far, which stay until vacuum (and
	// cannot even be marked dead while any snapshot from before the purge
	// lives). And no join: a semi-join of the rows with their own keys let
	// the planner pick a nested loop that ran the key scan once per row.
	sqlPurgeChunkEnd = `
SELECT pk, rk FROM entities WHERE table_id = $1 AND (pk, rk) >= ($2, $3)
ORDER BY pk, rk OFFSET $4 LIMIT 1`
	sqlPurgeRange = `
DELETE FROM entities WHERE table_id = $1 AND (pk, rk) >= ($2, $3) AND (pk, rk) <= ($4, $5)`
	sqlPurgeRest = `DELETE FROM entities WHERE table_id = $1 AND (pk, rk) >= ($2, $3)`

	sqlDropTombstone = `DELETE FROM tables WHERE id = $1`

	// A chunk's statements are served by the primary key in key order, and
	// by nothing else: with statistics that are stale (a table bulk
	// loaded since the last analyze) the planner would rather read all of
	// the table's rows and sort them for the chunk's last key, and its
	// estimates pass the cost at which it compiles a statement to machine
	// code, which takes longer than a chunk's work.
	sqlPurgePlans = `SELECT set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)`

	// On Citus a transaction may not write a reference table (tables)
	// after a statement that ran on many shards at once (the chunk):
	// on a distributed schema the purge runs its shards one after another.
	sqlOneShardAtATime = `SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`
)

// PurgeConfig tunes the background purge of deleted tables.
type PurgeConfig struct {
	Interval time.Duration // pause when there is nothing to purge
	Chunk    int           // entities deleted per transaction, at most
	// Grace is how long a tombstone outlives its last entity. A write that
	// resolved the table just before it was deleted may still commit its
	// entity after a purge pass; the final pass after Grace removes such
	// stragglers. It must exceed the longest write transaction.
	Grace time.Duration
	// ChunkTime is what one chunk should take: a chunk that takes longer
	// makes the next ones smaller, down to a hundred entities, so that the
	// purge never holds a database core for long. 0: chunks of Chunk.
	ChunkTime time.Duration
	// Share is the part of the time the purge may spend working: after a
	// pass it pauses so that its work is no more than Share of the time,
	// and four times as long while the connection pool is busy with
	// requests. 0: no pauses.
	Share float64
}

// DefaultPurgeConfig is what the server uses unless configured otherwise.
var DefaultPurgeConfig = PurgeConfig{Interval: 5 * time.Second, Chunk: 5000, Grace: 2 * time.Minute, ChunkTime: 100 * time.Millisecond, Share: 0.25}

// minPurgeChunk is the smallest chunk ChunkTime shrinks chunks to.
const minPurgeChunk = 100

// purgeState is what a store's purger remembers between passes: the
// cursor of each table it purges and the chunk size it has settled on.
// Another replica may purge the same table in between; the cursor is then
// only behind, which costs a walk over rows already purged, never a row
// left behind (see PurgeOnce).
type purgeState struct {
	mu      sync.Mutex
	cursors map[int64]purgeCursor
	chunk   int
}

// purgeCursor is where the next chunk of a table starts.
type purgeCursor struct {
	pk, rk string
	// final: the cursor started after the tombstone's grace period, so no
	// straggling write can commit behind it.
	final bool
}

// PurgeStats counts the work of one purge pass.
type PurgeStats struct {
	Entities int64 // entities deleted
	Tables   int64 // tombstones removed
	Pending  int64 // tombstones left after the pass (deleted tables not purged yet)
}

// Purge runs purge passes until ctx ends, pausing cfg.Interval whenever a
// pass found nothing to do, and after a pass that did work long enough to
// keep its share of the time to cfg.Share. Errors are logged and retried.
func (s *Store) Purge(ctx context.Context, cfg PurgeConfig, log *slog.Logger) {
	for {
		start := time.Now()
		stats, err := s.PurgeOnce(ctx, cfg)
		if err != nil && ctx.Err() == nil {
			log.Warn("purge deleted tables", "err", err)
		}
		pause := cfg.Interval
		if stats.Entities > 0 || stats.Tables > 0 {
			log.Debug("purged deleted tables", "entities", stats.Entities, "tables", stats.Tables)
			if err == nil {
				pause = s.purgePause(time.Since(start), cfg)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

// purgePause is the pause after a pass that worked for busy: long enough
// that the purge works no more than cfg.Share of the time, and four times
// that while most of the pool's connections serve requests.
func (s *Store) purgePause(busy time.Duration, cfg PurgeConfig) time.Duration {
	if cfg.Share <= 0 || cfg.Share >= 1 {
		return 0
	}
	pause := time.Duration(float64(busy) * (1 - cfg.Share) / cfg.Share)
	if st := s.pool.Stat(); st.AcquiredConns()*2 >= st.MaxConns() {
		pause *= 4
	}
	return min(pause, max(cfg.Interval, time.Second))
}

// purgeChunk is the size of the next chunk, at most cfg.Chunk.
func (s *Store) purgeChunk(cfg PurgeConfig) int {
	s.purge.mu.Lock()
	defer s.purge.mu.Unlock()
	if s.purge.chunk <= 0 || s.purge.chunk > cfg.Chunk || cfg.ChunkTime <= 0 {
		s.purge.chunk = cfg.Chunk
	}
	return s.purge.chunk
}

// tookChunk adapts the chunk size to a chunk of n entities that took d:
// toward what takes cfg.ChunkTime, halving at most or doubling at most
// per chunk.
func (s *Store) tookChunk(cfg PurgeConfig, n int, d time.Duration) {
	if cfg.ChunkTime <= 0 || n < s.purgeChunk(cfg) {
		return // a table's last chunk says little about the time per entity
	}
	s.purge.mu.Lock()
	defer s.purge.mu.Unlock()
	next := float64(s.purge.chunk) * float64(cfg.ChunkTime) / float64(max(d, time.Microsecond))
	next = min(max(next, float64(s.purge.chunk)/2), float64(s.purge.chunk)*2)
	s.purge.chunk = min(max(int(next), min(minPurgeChunk, cfg.Chunk)), cfg.Chunk)
}

// cursor returns the purge cursor of table id; a table without one starts
// from its first key.
func (s *Store) cursor(id int64, final bool) purgeCursor {
	s.purge.mu.Lock()
	defer s.purge.mu.Unlock()
	if c, ok := s.purge.cursors[id]; ok {
		return c
	}
	return purgeCursor{final: final}
}

// setCursor records the cursor of table id, or forgets it when done.
func (s *Store) setCursor(id int64, c purgeCursor, done bool) {
	s.purge.mu.Lock()
	defer s.purge.mu.Unlock()
	if done {
		delete(s.purge.cursors, id)
		return
	}
	if s.purge.cursors == nil {
		s.purge.cursors = map[int64]purgeCursor{}
	}
	s.purge.cursors[id] = c
}

// PurgeOnce deletes one chunk of entities from each deleted table that no
// other purger holds, and drops the tombstones that are empty and older
// than the grace period.
func (s *Store) PurgeOnce(ctx context.Context, cfg PurgeConfig) (stats PurgeStats, err error) {
	defer func() {
		if ctx.Err() != nil {
			return // shutting down: not a failure worth counting
		}
		s.observer().PurgePass(stats, err)
	}()
	rows, err := s.pool.Query(ctx, sqlNextTombstones)
	if err != nil {
		return stats, classify(fmt.Errorf("list deleted tables: %w", err))
	}
	var ids []int64
	var id, total int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &total}, func() error {
		ids = append(ids, id)
		return nil
	}); err != nil {
		return stats, classify(fmt.Errorf("list deleted tables: %w", err))
	}
	stats.Pending = total
	for _, id := range ids {
		// Its indexes first: they serve no one now, and the tombstone's
		// row takes their catalog rows with it.
		if err := s.dropTableIndexes(ctx, id); err != nil {
			return stats, classify(fmt.Errorf("purge table %d: %w", id, err))
		}
		n, dropped, err := s.purgeTable(ctx, cfg, id)
		if err != nil {
			return stats, classify(fmt.Errorf("purge table %d: %w", id, err))
		}
		stats.Entities += n
		if dropped {
			stats.Tables++
			stats.Pending--
		}
	}
	return stats, nil
}

// purgeTable deletes one chunk of the entities of deleted table id, from
// its cursor on, or drops its tombstone when a final pass found nothing
// left. Counted only once committed: a chunk cut short by its context
// (shutdown) or by a failed commit purged nothing.
func (s *Store) purgeTable(ctx context.Context, cfg PurgeConfig, id int64) (entities int64, dropped bool, err error) {
	var (
		start  = time.Now()
		chunk  = s.purgeChunk(cfg)
		next   purgeCursor
		locked bool
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlPurgePlans); err != nil {
			return err
		}
		if s.distributed.Load() {
			if _, err := tx.Exec(ctx, sqlOneShardAtATime); err != nil {
				return err
			}
		}
		var final bool
		err := tx.QueryRow(ctx, sqlLockTombstone, id, cfg.Grace.Seconds()).Scan(&final)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // another purger has it, or it is gone
		}
		if err != nil {
			return err
		}
		locked = true
		cur := s.cursor(id, final)
		next = cur
		var endPK, endRK string
		var tag pgconn.CommandTag
		switch err := tx.QueryRow(ctx, sqlPurgeChunkEnd, id, cur.pk, cur.rk, chunk-1).Scan(&endPK, &endRK); {
		case errors.Is(err, pgx.ErrNoRows):
			// Fewer than a chunk left: the table's last chunk.
			if tag, err = tx.Exec(ctx, sqlPurgeRest, id, cur.pk, cur.rk); err != nil {
				return err
			}
			entities = tag.RowsAffected()
			switch {
			case final && cur.final && entities == 0:
				_, err := tx.Exec(ctx, sqlDropTombstone, id)
				dropped = err == nil
				return err
			case final && !cur.final:
				// The cursor passed before the grace period ended: a
				// straggler may have committed behind it. Once more from
				// the start.
				next = purgeCursor{final: true}
			}
		case err != nil:
			return err
		default:
			if tag, err = tx.Exec(ctx, sqlPurgeRange, id, cur.pk, cur.rk, endPK, endRK); err != nil {
				return err
			}
			entities = tag.RowsAffected()
			next = purgeCursor{pk: endPK, rk: endRK, final: cur.final}
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	if dropped {
		// The table's change feed goes with it (changes_read.go). Not
		// in the transaction above: on Citus it may not write tables
		// after a second statement on many shards. Should this fail,
		// retention removes the changes in time.
		for _, sql := range []string{sqlPurgeTablePending, sqlPurgeTablePositions, sqlPurgeTableChanges} {
			if _, err := s.pool.Exec(ctx, sql, id); err != nil {
				return entities, dropped, classify(fmt.Errorf("purge changes of table %d: %w", id, err))
			}
		}
	}
	s.setCursor(id, next, dropped || !locked)
	if locked && !dropped {
		d := time.Since(start)
		s.tookChunk(cfg, int(entities), d)
		s.observer().PurgeChunk(d, entities)
	}
	return entities, dropped, nil
}
