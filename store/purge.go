package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
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

	sqlPurgeChunk = `
DELETE FROM entities WHERE table_id = $1 AND (pk, rk) IN (
    SELECT pk, rk FROM entities WHERE table_id = $1 ORDER BY pk, rk LIMIT $2)`

	sqlDropTombstone = `DELETE FROM tables WHERE id = $1`

	// On Citus a transaction may not write a reference table (tables)
	// after a statement that ran on many shards at once (the chunk):
	// on a distributed schema the purge runs its shards one after another.
	sqlOneShardAtATime = `SET LOCAL citus.multi_shard_modify_mode TO 'sequential'`
)

// PurgeConfig tunes the background purge of deleted tables.
type PurgeConfig struct {
	Interval time.Duration // pause when there is nothing to purge
	Chunk    int           // entities deleted per transaction
	// Grace is how long a tombstone outlives its last entity. A write that
	// resolved the table just before it was deleted may still commit its
	// entity after a purge pass; the final pass after Grace removes such
	// stragglers. It must exceed the longest write transaction.
	Grace time.Duration
}

// DefaultPurgeConfig is what the server uses unless configured otherwise.
var DefaultPurgeConfig = PurgeConfig{Interval: 5 * time.Second, Chunk: 5000, Grace: 2 * time.Minute}

// PurgeStats counts the work of one purge pass.
type PurgeStats struct {
	Entities int64 // entities deleted
	Tables   int64 // tombstones removed
	Pending  int64 // tombstones left after the pass (deleted tables not purged yet)
}

// Purge runs purge passes until ctx ends, pausing cfg.Interval whenever a
// pass found nothing to do. Errors are logged and retried.
func (s *Store) Purge(ctx context.Context, cfg PurgeConfig, log *slog.Logger) {
	for {
		stats, err := s.PurgeOnce(ctx, cfg)
		if err != nil && ctx.Err() == nil {
			log.Warn("purge deleted tables", "err", err)
		}
		if stats.Entities > 0 || stats.Tables > 0 {
			log.Debug("purged deleted tables", "entities", stats.Entities, "tables", stats.Tables)
			if err == nil {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(cfg.Interval):
		}
	}
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
		// Counted only once committed: a pass cut short by its context
		// (shutdown) or by a failed commit purged nothing of this table.
		var entities int64
		var dropped bool
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
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
			tag, err := tx.Exec(ctx, sqlPurgeChunk, id, cfg.Chunk)
			if err != nil {
				return err
			}
			entities = tag.RowsAffected()
			if entities == 0 && final {
				if _, err := tx.Exec(ctx, sqlDropTombstone, id); err != nil {
					return err
				}
				dropped = true
			}
			return nil
		})
		if err != nil {
			return stats, classify(fmt.Errorf("purge table %d: %w", id, err))
		}
		stats.Entities += entities
		if dropped {
			stats.Tables++
			stats.Pending--
		}
	}
	return stats, nil
}
