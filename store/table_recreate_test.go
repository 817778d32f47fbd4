package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/odata"

	"github.com/pgtables/pgtables/internal/testdb"
)

// A table deleted and created again under the same name, over and over
// while writers and readers run, on one PostgreSQL (and on Citus when the
// suite runs there).
func TestTableRecreatedUnderConcurrency(t *testing.T) {
	t.Parallel()
	dsn := migratedDB(t)
	testTableRecreated(t, storeOn(t, dsn, 0), storeOn(t, dsn, 0))
}

// The same on a Citus cluster, where single writes name their table by a
// cached id (tableids.go).
func TestCitusTableRecreatedUnderConcurrency(t *testing.T) {
	testdb.NeedCitus(t)
	t.Parallel()
	dsn := migratedDB(t)
	s, admin := storeOn(t, dsn, 0), storeOn(t, dsn, 0)
	for _, st := range []*Store{s, admin} {
		if !st.Distributed() {
			t.Fatal("entities are not distributed")
		}
	}
	testTableRecreated(t, s, admin)
}

// testTableRecreated runs writers and readers on s while admin, another
// replica as far as any cache goes, deletes the table and creates it again.
// Row keys are unique per insert, so each entity lives in one incarnation,
// found afterwards by its table id. Then:
//   - a write or read that ran wholly within one incarnation's life touched
//     that incarnation's entities only, and found its table;
//   - no acknowledged write landed in, and no read was served from, an
//     incarnation that was deleted before the operation began.
func testTableRecreated(t *testing.T, s, admin *Store) {
	ctx := context.Background()
	type op struct {
		kind       string // insert, upsert, update, update-if-match, delete-if-match, read
		rk         string
		start, end time.Time
		err        error
	}
	// created: CreateTable returned; deleting: DeleteTable called;
	// deleted: DeleteTable returned.
	type life struct{ created, deleting, deleted time.Time }
	var (
		mu    sync.Mutex
		ops   []op
		rks   []string // inserted, for updates and reads
		lives []life
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	pick := func(r *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(rks) == 0 {
			return "none"
		}
		return rks[r.IntN(len(rks))]
	}
	for w := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; !stop.Load() && i < 5000; i++ {
				// A few partitions, so that on Citus the statements go to
				// both workers.
				pk := "p" + strconv.Itoa(r.IntN(4))
				kinds := [...]string{"insert", "upsert", "update", "update-if-match", "read", "insert", "upsert", "update", "update-if-match", "read", "delete-if-match"}
				o := op{kind: kinds[r.IntN(len(kinds))], start: time.Now()}
				switch o.kind {
				case "insert", "upsert":
					o.rk = fmt.Sprintf("%s-%d-%d", pk, w, i)
					wr := Write{Op: OpInsert, PartitionKey: pk, RowKey: o.rk}
					if o.kind == "upsert" {
						wr.Op = OpReplace // Insert Or Replace: no If-Match
					}
					_, o.err = s.Write(ctx, acct, "t", &wr)
				case "update":
					o.rk = pick(r)
					_, o.err = s.Write(ctx, acct, "t", &Write{Op: OpReplace, PartitionKey: o.rk[:2], RowKey: o.rk, Properties: props("U", i), Match: MatchAny})
				case "update-if-match", "delete-if-match":
					// Read, then write on the condition of the ETag read:
					// both within the operation.
					o.rk = pick(r)
					var e *odata.Entity
					if e, o.err = s.GetEntity(ctx, acct, "t", o.rk[:2], o.rk); o.err != nil {
						break
					}
					m, err := ParseMatch([]string{e.ETag})
					if err != nil {
						t.Error(err)
						break
					}
					wr := Write{Op: OpReplace, PartitionKey: o.rk[:2], RowKey: o.rk, Properties: props("U", i), Match: m}
					if o.kind == "delete-if-match" {
						wr = Write{Op: OpDelete, PartitionKey: o.rk[:2], RowKey: o.rk, Match: m}
					}
					_, o.err = s.Write(ctx, acct, "t", &wr)
				case "read":
					o.rk = pick(r)
					_, o.err = s.GetEntity(ctx, acct, "t", o.rk[:2], o.rk)
				}
				o.end = time.Now()
				mu.Lock()
				ops = append(ops, o)
				if (o.kind == "insert" || o.kind == "upsert") && o.err == nil {
					rks = append(rks, o.rk)
				}
				mu.Unlock()
			}
		})
	}
	// At least 12 incarnations, more on a slow machine, each living
	// longer, until enough operations ran wholly within one to tell (on a
	// loaded machine an operation can outlast 100 ms).
	withinSoFar := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, o := range ops {
			for _, l := range lives {
				if o.start.After(l.created) && o.end.Before(l.deleting) {
					n++
					break
				}
			}
		}
		return n
	}
	for k := 0; k < 12 || k < 60 && withinSoFar() < 150; k++ {
		if err := admin.CreateTable(ctx, acct, "t"); err != nil {
			t.Fatal(err)
		}
		l := life{created: time.Now()}
		if k < 12 {
			time.Sleep(100 * time.Millisecond)
		} else {
			time.Sleep(500 * time.Millisecond)
		}
		l.deleting = time.Now()
		if err := admin.DeleteTable(ctx, acct, "t"); err != nil {
			t.Fatal(err)
		}
		l.deleted = time.Now()
		mu.Lock()
		lives = append(lives, l)
		mu.Unlock()
		// A moment without the table: writes meanwhile must fail.
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()

	ids, err := pgx.CollectRows(must(s.pool.Query(ctx, `SELECT id FROM tables WHERE account = $1 AND lname = 't' ORDER BY id`, acct)), pgx.RowTo[int64])
	if err != nil || len(ids) != len(lives) {
		t.Fatalf("%d incarnations recorded, %d in tables (%v)", len(lives), len(ids), err)
	}
	incarnation := map[int64]int{}
	for k, id := range ids {
		incarnation[id] = k
	}
	home := map[string]int64{}
	rows := must(s.pool.Query(ctx, `SELECT rk, table_id FROM entities`))
	var rk string
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&rk, &id}, func() error { home[rk] = id; return nil }); err != nil {
		t.Fatal(err)
	}
	// A deleted entity is no longer there to tell its table: the
	// operations on it are checked for the table's outcome only.
	deleted := map[string]bool{}
	for _, o := range ops {
		if o.kind == "delete-if-match" && o.err == nil {
			deleted[o.rk] = true
		}
	}
	within, after := 0, 0
	for _, o := range ops {
		// An operation that succeeded on an existing entity used the
		// incarnation that holds it.
		if o.err == nil && o.rk != "none" && !deleted[o.rk] {
			if j, ok := incarnation[home[o.rk]]; ok && o.start.After(lives[j].deleted) {
				t.Errorf("%s %s began %v after incarnation %d was deleted, and succeeded on its entity", o.kind, o.rk, o.start.Sub(lives[j].deleted), j)
			}
		}
		for _, l := range lives {
			if o.start.After(l.deleted) {
				after++
				break
			}
		}
		k := -1
		for i, l := range lives {
			if o.start.After(l.created) && o.end.Before(l.deleting) {
				k = i
			}
		}
		if k < 0 {
			continue // overlaps a deletion or a creation: either outcome
		}
		within++
		switch {
		case errors.Is(o.err, ErrTableNotFound):
			t.Errorf("%s %s within incarnation %d: table not found", o.kind, o.rk, k)
		case deleted[o.rk]:
			if o.err != nil && !errors.Is(o.err, ErrEntityNotFound) && !errors.Is(o.err, ErrConditionNotMet) {
				t.Errorf("%s %s: %v", o.kind, o.rk, o.err)
			}
		case errors.Is(o.err, ErrConditionNotMet) && strings.HasSuffix(o.kind, "-if-match"):
			// Another worker wrote the entity between the read and the
			// write.
		case o.err == nil && o.rk != "none" && home[o.rk] != ids[k]:
			t.Errorf("%s %s within incarnation %d (table %d) succeeded on table %d's entity", o.kind, o.rk, k, ids[k], home[o.rk])
		case errors.Is(o.err, ErrEntityNotFound) && home[o.rk] == ids[k] && o.kind != "insert":
			// The entity is this incarnation's: the op did not find it only
			// if its insert had not yet committed.
			inserted := false
			for _, w := range ops {
				if (w.kind == "insert" || w.kind == "upsert") && w.rk == o.rk && w.err == nil && w.end.Before(o.start) {
					inserted = true
				}
			}
			if inserted {
				t.Errorf("%s %s within incarnation %d: not found after its insert", o.kind, o.rk, k)
			}
		case o.err != nil && !errors.Is(o.err, ErrEntityNotFound):
			t.Errorf("%s %s: %v", o.kind, o.rk, o.err)
		}
	}
	t.Logf("%d operations, %d within one incarnation, %d after a deletion, %d incarnations", len(ops), within, after, len(lives))
	if within < 100 {
		t.Errorf("only %d operations ran within one incarnation: the test proves little", within)
	}
}
