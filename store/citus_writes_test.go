package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgtables/pgtables/odata"
)

// directPartition returns a partition of table lt whose shard's placement
// is on a node with a directRead, with that node and range.
func directPartition(t *testing.T, s *Store, lt string) (string, *node, shardRange) {
	t.Helper()
	rt := s.router.Load()
	for i := range 1000 {
		pk := fmt.Sprint("p", i)
		if n, sr, _ := rt.placeRange(distributionKey(acct, lt, pk)); n != nil && sr.direct != nil {
			return pk, n, sr
		}
	}
	t.Fatal("no partition's shard on a node with a placement of tables")
	return "", nil, shardRange{}
}

// setDirect makes the router's placements give direct for the range of sr,
// and keeps them from being reloaded.
func setDirect(s *Store, sr shardRange, direct *directRead) {
	rt := s.router.Load()
	p := *rt.cur.Load()
	p.ranges = append([]shardRange(nil), p.ranges...)
	for i := range p.ranges {
		if p.ranges[i].min == sr.min {
			p.ranges[i].direct = direct
		}
	}
	p.loaded = time.Now().Add(time.Hour)
	rt.cur.Store(&p)
}

// A shardCopy is a copy of a shard's placement on its node, made as
// the shard is now, with the names a directRead needs.
type shardCopy struct {
	id                  int64
	shard, tables, copy string
}

// copyShard copies the placement of the shard of table lt's partition pk
// on its node n, as a table of the test's schema there (its indexes too,
// for the upserts' ON CONFLICT).
func copyShard(t *testing.T, s *Store, n *node, lt, pk string) shardCopy {
	t.Helper()
	ctx := context.Background()
	var c shardCopy
	err := s.pool.QueryRow(ctx, `
SELECT s.shardid, shard_name('entities'::regclass, s.shardid), shard_name('tables'::regclass, (SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'tables'::regclass)),
       current_schema() || '.stale_copy'
FROM pg_dist_shard s WHERE s.shardid = get_shard_id_for_distribution_column('entities', $1::bigint)`,
		distributionKey(acct, lt, pk)).Scan(&c.id, &c.shard, &c.tables, &c.copy)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.pool.Exec(ctx, `CREATE TABLE `+c.copy+` (LIKE `+c.shard+` INCLUDING ALL); INSERT INTO `+c.copy+` SELECT * FROM `+c.shard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = n.pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+c.copy) })
	return c
}

// A single write on the node of its shard writes the placement there, and
// when the placement is not the node's (a shard moved or split since the
// placements were loaded) or its table is gone, the write goes through
// Citus instead: it never lands in a placement that Citus no longer reads.
// Here the "placement" is a copy of the shard: written as the node's, it
// takes the write, which shows that the test can tell.
func TestCitusWriteOnStalePlacementGoesThroughCitus(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	pk, n, sr := directPartition(t, s, "t")
	if _, err := s.Write(ctx, acct, "t", &Write{Op: OpInsert, PartitionKey: pk, RowKey: "r", Properties: props("N", 1)}); err != nil {
		t.Fatal(err)
	}
	c := copyShard(t, s, n, "t", pk)
	shardID, shard, tables, copyName := c.id, c.shard, c.tables, c.copy
	valueOf := func(q querier, sql string) int64 {
		t.Helper()
		var stored []byte
		if err := q.QueryRow(ctx, sql, pk).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		got, err := odata.DecodeStored(stored, nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("%v, %v", got, err)
		}
		return got[0].Value.Int
	}
	inCitus := func() int64 { return valueOf(s.pool, `SELECT props FROM entities WHERE pk = $1 AND rk = 'r'`) }
	inCopy := func() int64 { return valueOf(n.pool, `SELECT props FROM `+copyName+` WHERE pk = $1 AND rk = 'r'`) }
	write := func(direct *directRead, op Op, m Match, v int) {
		t.Helper()
		setDirect(s, sr, direct)
		if _, err := s.Write(ctx, acct, "t", &Write{Op: op, PartitionKey: pk, RowKey: "r", Properties: props("N", v), Match: m}); err != nil {
			t.Fatal(err)
		}
	}
	write(newDirectRead(shardID, copyName, tables), OpReplace, MatchAny, 2)
	if got, in := inCopy(), inCitus(); got != 2 || in != 1 {
		t.Fatalf("written as the node's placement, the copy has N=%d and entities N=%d, want 2 and 1: the test cannot tell", got, in)
	}
	// A shard whose placement is on another node, as after a move.
	var elsewhere int64
	for _, r := range s.router.Load().cur.Load().ranges {
		if r.node != n && r.direct != nil {
			elsewhere = r.direct.id
		}
	}
	if elsewhere == 0 {
		t.Fatal("no shard on another node")
	}
	for i, tc := range []struct {
		name   string
		direct *directRead
		op     Op
		m      Match
	}{
		{"a placement on another node", newDirectRead(elsewhere, copyName, tables), OpReplace, MatchAny},
		{"a shard no longer in the metadata (split)", newDirectRead(shardID+1_000_000, copyName, tables), OpReplace, MatchAny},
		{"a placement on another node: upsert", newDirectRead(elsewhere, copyName, tables), OpReplace, Match{}},
		{"a dropped placement", newDirectRead(shardID, shard+"_gone", tables), OpMerge, MatchAny},
		{"the node's placement", sr.direct, OpReplace, MatchAny},
	} {
		v := 10 + i
		write(tc.direct, tc.op, tc.m, v)
		if got, in := inCopy(), inCitus(); got != 2 || in != int64(v) {
			t.Errorf("%s: the copy has N=%d and entities N=%d, want 2 and %d", tc.name, got, in, v)
		}
	}
	// A delete and an insert too.
	setDirect(s, sr, newDirectRead(elsewhere, copyName, tables))
	if _, err := s.Write(ctx, acct, "t", &Write{Op: OpDelete, PartitionKey: pk, RowKey: "r", Match: MatchAny}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "t", &Write{Op: OpInsert, PartitionKey: pk, RowKey: "r", Properties: props("N", 20)}); err != nil {
		t.Fatal(err)
	}
	if got, in := inCopy(), inCitus(); got != 2 || in != 20 {
		t.Errorf("delete and insert: the copy has N=%d and entities N=%d, want 2 and 20", got, in)
	}
}

// A single write on its shard's placement waits for the shard's metadata
// lock, which a shard move or split holds while it stops the shard's
// writes, copies the last of them and moves the placement.
func TestCitusWriteOnPlacementWaitsForAMove(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	pk, n, sr := directPartition(t, s, "t")
	setDirect(s, sr, sr.direct)
	mover, err := n.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mover.Rollback(context.Background()) }()
	// What a move runs on every node (ExclusiveLock).
	if _, err := mover.Exec(ctx, `SELECT lock_shard_metadata(7, ARRAY[$1::bigint])`, sr.direct.id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Write(ctx, acct, "t", &Write{Op: OpReplace, PartitionKey: pk, RowKey: "r", Properties: props("N", 1)})
		done <- err
	}()
	// The write waits on the lock the mover holds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		err := mover.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks h JOIN pg_locks w USING (locktype, database, classid, objid, objsubid)
  WHERE h.pid = pg_backend_pid() AND h.granted AND h.locktype = 'advisory' AND NOT w.granted)`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the write finished (%v) while the shard's metadata was locked", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no write waits for the shard's metadata lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := mover.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write after the lock: %v", err)
	}
}

// A direct write with the feed on records its change row in its own
// statement, on the placement of changes beside the shard's, with the id
// and at that the placement's table has no defaults for; a delete, and a
// node whose placement of changes is not known, keep the change row for
// after the write (changes_citus.go).
func TestDirectWriteRecordsItsChangeHere(t *testing.T) {
	t.Parallel()
	s := &Store{}
	for _, c := range []struct {
		name, op, sql, changes string
		here                   bool
	}{
		{"insert", changeInsert, sqlInsertByID, "changes_7", true},
		{"upsert", changeUpsertReplace, sqlUpsertReplaceByID, "changes_7", true},
		{"update", changeReplace, sqlUpdateByID, "changes_7", true},
		{"delete", changeDelete, sqlDeleteByID, "changes_7", false},
		{"no placement of changes", changeInsert, sqlInsertByID, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := newDirectWrites(5, "tables_1")
			d.changes = c.changes
			w := &Write{PartitionKey: "p", RowKey: "r"}
			args := make([]any, 7)
			_, ch := s.citusCaptured(w, c.op, c.sql, len(args))
			dest := append([]any{new(uint32)}, ch.dest()...)
			sql, gotArgs, gotDest, here := d.recordedHere(ch, c.sql, args, dest)
			if here != c.here {
				t.Fatalf("here %v, want %v", here, c.here)
			}
			if !here {
				return
			}
			on := d.statement(sql, "entities_5")
			for _, want := range []string{" entities_5 AS entities ", "INSERT INTO changes_7 (id, at, dkey,", "SELECT nextval('changes_id_seq'), now(), dkey,", "$8::bigint, NULL::boolean"} {
				if !strings.Contains(on, want) {
					t.Errorf("statement lacks %q:\n%s", want, on)
				}
			}
			if len(gotArgs) != len(args)+1 || gotArgs[len(args)] != ch.tag || len(gotDest) != 1 {
				t.Errorf("%d arguments (last %v), %d destinations; want %d (the tag %d), 1", len(gotArgs), gotArgs[len(gotArgs)-1], len(gotDest), len(args)+1, ch.tag)
			}
		})
	}
}
