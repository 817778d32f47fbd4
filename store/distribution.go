package store

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
)

// distributionKey is the dkey column of the entities of one partition: the
// first 8 bytes of the MD5 of "<account>/<lower-case table name>/<pk>",
// read as a big-endian int64. '/' can be in none of the three, so no two
// partitions share the text. Migration 0003 computes the same in SQL for
// the rows it finds.
//
// On Citus entities are distributed by it (migration 0003): one partition
// lives on one shard, and the partitions of a table spread over all of
// them. Every statement on entities that concerns one partition names it,
// so that Citus sends the statement to that shard alone; derived from the
// request rather than from the table's id, it costs no round trip to find.
// On plain PostgreSQL it is the last column of the primary key.
func distributionKey(account, lt, pk string) int64 {
	b := make([]byte, 0, len(account)+len(lt)+len(pk)+2)
	b = append(append(append(append(append(b, account...), '/'), lt...), '/'), pk...)
	sum := md5.Sum(b)
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

const (
	sqlCitusInstalled = `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`
	sqlDistributed    = `SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'entities'::regclass)`
)

// DetectDistribution finds out whether entities are distributed, as
// migration 0003 does where Citus is installed. Call it once the schema is
// migrated. On a distributed schema the statements of one partition go to
// its shard's node (route.go), and the point reads that share a round trip
// are merged into one statement per shard, not per table: Citus cannot plan
// a join of many shards that reads xmin (see sqlGetShard).
func (s *Store) DetectDistribution(ctx context.Context) error {
	var citus, distributed bool
	if err := s.pool.QueryRow(ctx, sqlCitusInstalled).Scan(&citus); err != nil {
		return classify(fmt.Errorf("detect citus: %w", err))
	}
	if citus {
		if err := s.pool.QueryRow(ctx, sqlDistributed).Scan(&distributed); err != nil {
			return classify(fmt.Errorf("detect citus: %w", err))
		}
	}
	s.distributed.Store(distributed)
	if distributed {
		return s.startRouting(ctx)
	}
	return nil
}

// Distributed reports what DetectDistribution found.
func (s *Store) Distributed() bool { return s.distributed.Load() }
