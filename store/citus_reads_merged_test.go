package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pgtables/pgtables/odata"
)

// On Citus the point reads of one table and shard that share a round trip
// become one statement on the shard's placement, which the shard's node
// answers itself (not by running each read again alone), and each read
// gets its own outcome: the entity with its ETag, or no entity.
func TestCitusPointReadsMergedPerShard(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	id, err := s.liveTableID(ctx, acct, "t")
	if err != nil {
		t.Fatal(err)
	}
	// Partitions of two shards of one node: three of one, one of another.
	rt := s.router.Load()
	byShard := map[int32][]string{}
	var shards []int32
	var n *node
	for i := 0; len(shards) < 2 || len(byShard[shards[0]]) < 3; i++ {
		if i == 10000 {
			t.Fatalf("no shard holds 3 of %d partitions: %v", i, byShard)
		}
		pk := fmt.Sprint("p", i)
		got, sr, ok := rt.placeRange(distributionKey(acct, "t", pk))
		if !ok || got == nil || sr.direct == nil {
			continue // on the coordinator
		}
		if n == nil {
			n = got
		}
		if got != n {
			continue
		}
		if byShard[sr.min] == nil {
			shards = append(shards, sr.min)
		}
		byShard[sr.min] = append(byShard[sr.min], pk)
	}
	one, other := byShard[shards[0]], byShard[shards[1]]
	// The node's writes guard their table id on its placement of tables.
	if g := n.writes.tableGuard(id); g.sql == sqlGuardTableLive {
		t.Errorf("the node's table guard goes through Citus: %s", g.sql)
	}
	etags := map[string]string{}
	for _, pk := range []string{one[0], one[1], other[0]} {
		res, err := s.Write(ctx, acct, "t", &Write{Op: OpInsert, PartitionKey: pk, RowKey: "r", Properties: props("P", pk)})
		if err != nil {
			t.Fatal(err)
		}
		etags[pk] = res.ETag
	}
	tests := []struct {
		pk   string
		want error
	}{
		{one[0], nil}, {one[1], nil}, {one[2], ErrEntityNotFound}, {other[0], nil},
	}
	var reads []*pointRead
	var batch []*combined
	for _, tt := range tests {
		r := newPointReadByID(acct, "t", tt.pk, "r")
		_, sr, _ := rt.placeRange(r.args[1].(int64))
		r.onShard(sr.direct, id)
		reads = append(reads, r)
		batch = append(batch, &r.op)
	}
	units := groupStatements(batch)
	if len(units) != 2 || len(units[0]) != 3 {
		t.Fatalf("%d statements, the first of %d reads, for 2 shards", len(units), len(units[0]))
	}
	// The merged statement runs as it is on the node: a failure would
	// only show as each read being run again alone.
	sql, args := units[0][0].merge(units[0])
	rows, _ := n.pool.Query(ctx, sql, args...)
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatalf("merged read of %d: %v", len(units[0]), err)
	}
	n.reads.send(ctx, batch)
	for i, tt := range tests {
		if !reads[i].here {
			t.Errorf("%s: the shard's placement is not the node's", tt.pk)
		}
		e, err := reads[i].entity(reads[i].op.err)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.pk, err, tt.want)
			continue
		}
		if err != nil {
			continue
		}
		if err := e.DecodeProperties(); err != nil || e.PartitionKey != tt.pk || e.ETag != etags[tt.pk] || len(e.Properties) != 1 || e.Properties[0].Value.Str != tt.pk {
			t.Errorf("%s: %+v, %v; want ETag %s", tt.pk, e, err, etags[tt.pk])
		}
	}
	// A table that is gone fails the statement's guard, and the read
	// finds no table of that name.
	if err := s.DeleteTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	s.tableIDs.put(acct, "t", id) // as another replica would still have it
	for _, pk := range []string{one[0], one[2]} {
		if _, err := s.GetEntity(ctx, acct, "t", pk, "r"); !errors.Is(err, ErrTableNotFound) {
			t.Errorf("%s of a deleted table: %v, want ErrTableNotFound", pk, err)
		}
	}
}

// A point read on a shard's placement that is no longer the node's, as
// after a shard move or split that the cached placements do not know of
// yet, goes through Citus: it never reads a placement that Citus no longer
// writes to. Here the placements hold a copy of the shard taken before an
// update: read as the node's placement, it gives the old value, which
// shows that the test can tell.
func TestCitusPointReadOfStalePlacementGoesThroughCitus(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	rt := s.router.Load()
	var pk string
	var n *node
	var sr shardRange
	for i := 0; n == nil || sr.direct == nil; i++ {
		pk = fmt.Sprint("p", i)
		n, sr, _ = rt.placeRange(distributionKey(acct, "t", pk))
	}
	if _, err := s.Write(ctx, acct, "t", &Write{Op: OpInsert, PartitionKey: pk, RowKey: "r", Properties: props("N", 1)}); err != nil {
		t.Fatal(err)
	}
	c := copyShard(t, s, n, "t", pk)
	shardID, shard, tables, copyName := c.id, c.shard, c.tables, c.copy
	if _, err := s.Write(ctx, acct, "t", &Write{Op: OpReplace, PartitionKey: pk, RowKey: "r", Properties: props("N", 2), Match: MatchAny}); err != nil {
		t.Fatal(err)
	}
	read := func(direct *directRead) int64 {
		t.Helper()
		setDirect(s, sr, direct)
		e, err := s.GetEntity(ctx, acct, "t", pk, "r")
		if err != nil {
			t.Fatal(err)
		}
		got, err := odata.DecodeStored(e.Stored, nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("%v, %v", got, err)
		}
		return got[0].Value.Int
	}
	if got := read(newDirectRead(shardID, copyName, tables)); got != 1 {
		t.Fatalf("the copy read as the node's placement gives N=%d, want the old 1: the test cannot tell", got)
	}
	// No such placement on the node: the shard moved.
	if got := read(newDirectRead(shardID+1_000_000, copyName, tables)); got != 2 {
		t.Errorf("a stale placement gave N=%d, want 2", got)
	}
	// No such table on the node: the placement was dropped.
	if got := read(newDirectRead(shardID, shard+"_gone", tables)); got != 2 {
		t.Errorf("a dropped placement gave N=%d, want 2", got)
	}
	if got := read(sr.direct); got != 2 {
		t.Errorf("the node's placement gave N=%d, want 2", got)
	}
}
