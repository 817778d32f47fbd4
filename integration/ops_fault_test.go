package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// TestTerminateAllConnectionsUnderLoad kills every database connection of
// the server (pg_terminate_backend on each backend with its
// application_name) while several clients write. Clients see 503
// ServerBusy, never another error; writes succeed again within seconds
// without a restart; and every write that was acknowledged is there.
func TestTerminateAllConnectionsUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	app := "pgt_fault_" + randHex()
	e := newOpsEnv(t, opsConfig{appName: app, maxConns: 8, acquireWait: time.Second,
		http: httpapi.Config{RequestTimeout: 5 * time.Second}})
	c, table := e.newTable()
	admin := e.connect(t)

	var (
		mu        sync.Mutex
		acked     []string // RowKeys acknowledged with 2xx
		statuses  = map[string]int{}
		afterKill atomic.Int64 // successes since the last termination
		killed    atomic.Bool
		seen503   atomic.Bool
	)
	record := func(err error, keys ...string) {
		mu.Lock()
		defer mu.Unlock()
		var re *azcore.ResponseError
		switch {
		case err == nil:
			acked = append(acked, keys...)
			statuses["2xx"]++
			if killed.Load() {
				afterKill.Add(1)
			}
		case errors.As(err, &re):
			statuses[fmt.Sprintf("%d %s", re.StatusCode, re.ErrorCode)]++
			if re.StatusCode == http.StatusServiceUnavailable && re.ErrorCode == "ServerBusy" {
				seen503.Store(true)
			}
		default:
			statuses["transport: "+err.Error()]++
		}
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	const writers = 6
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if w == 0 {
					// One client writes entity group transactions.
					k1, k2 := fmt.Sprintf("b%d-%d-a", w, i), fmt.Sprintf("b%d-%d-b", w, i)
					_, err := c.SubmitTransaction(ctx, []aztables.TransactionAction{
						{ActionType: aztables.TransactionTypeAdd, Entity: []byte(`{"PartitionKey":"batch","RowKey":"` + k1 + `"}`)},
						{ActionType: aztables.TransactionTypeAdd, Entity: []byte(`{"PartitionKey":"batch","RowKey":"` + k2 + `"}`)},
					}, nil)
					record(err, "batch/"+k1, "batch/"+k2)
					continue
				}
				pk, rk := fmt.Sprintf("w%d", w), fmt.Sprintf("%06d", i)
				_, err := c.AddEntity(ctx, []byte(`{"PartitionKey":"`+pk+`","RowKey":"`+rk+`","I":`+fmt.Sprint(i)+`}`), nil)
				record(err, pk+"/"+rk)
			}
		})
	}

	terminate := func() int {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		if err != nil {
			t.Error(err)
		}
		return n
	}
	time.Sleep(300 * time.Millisecond) // load first
	deadline := time.Now().Add(20 * time.Second)
	rounds := 0
	var lastKill time.Time
	for !seen503.Load() && time.Now().Before(deadline) {
		afterKill.Store(0)
		killed.Store(true)
		lastKill = time.Now()
		n := terminate()
		rounds++
		t.Logf("round %d: terminated %d backends", rounds, n)
		time.Sleep(200 * time.Millisecond)
	}
	for afterKill.Load() < 50 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d successes %v after the last termination", afterKill.Load(), time.Since(lastKill))
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("answers: %v", statuses)
	if !seen503.Load() {
		t.Error("no client saw 503 ServerBusy")
	}
	if afterKill.Load() < 50 {
		t.Errorf("only %d successes after the database connections came back", afterKill.Load())
	}
	for s, n := range statuses {
		if s != "2xx" && s != "503 ServerBusy" {
			t.Errorf("%d answers %q", n, s)
		}
	}
	// Everything acknowledged is there.
	var present int
	err := admin.QueryRow(ctx, `
SELECT count(*) FROM entities e JOIN tables t ON t.id = e.table_id
WHERE t.lname = lower($1) AND t.deleted_at IS NULL AND e.pk || '/' || e.rk = ANY($2)`, table, acked).Scan(&present)
	if err != nil {
		t.Fatal(err)
	}
	if present != len(acked) {
		t.Errorf("%d of %d acknowledged writes are in the database", present, len(acked))
	}
	t.Logf("%d acknowledged writes, all present", len(acked))
}

// TestDeleteLargeTable deletes a table of 100,000 entities: the delete
// answers at once (its time is logged, not asserted), the name is free for
// a new table at once, the old rows are gone after the purge, and the new
// table of the same name is untouched by it.
func TestDeleteLargeTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newOpsEnv(t, opsConfig{})
	const name, total = "bigtable", 100_000
	if _, err := e.service.CreateTable(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	var oldID int64
	if err := e.pool.QueryRow(ctx, `SELECT id FROM tables WHERE lname = $1 AND deleted_at IS NULL`, name).Scan(&oldID); err != nil {
		t.Fatal(err)
	}
	// The stored form of store/doc.go: {"N": ["i32", n], "S": ["str", "..."]}.
	start := time.Now()
	tag, err := e.pool.Exec(ctx, `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT $1, entity_dkey(t.account, t.lname, 'p' || (g % 100)), 'p' || (g % 100), lpad(g::text, 7, '0'), $2, 100,
       jsonb_build_object('N', jsonb_build_array('i32', g), 'S', jsonb_build_array('str', 'value ' || g))
FROM tables t, generate_series(1, $3::int) g WHERE t.id = $1`, oldID, odata.Ticks(time.Now()), total)
	if err != nil || tag.RowsAffected() != total {
		t.Fatalf("load: %v %v", tag, err)
	}
	t.Logf("loaded %d entities in %v", total, time.Since(start))
	old := e.service.NewClient(name)
	got, err := old.GetEntity(ctx, "p7", "0000007", nil)
	if err != nil || !bytes.Contains(got.Value, []byte(`"S":"value 7"`)) {
		t.Fatalf("a loaded entity: %v %s", err, got.Value)
	}

	start = time.Now()
	if _, err := e.service.DeleteTable(ctx, name, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted a table of %d entities in %v", total, time.Since(start))
	if _, err := e.service.CreateTable(ctx, name, nil); err != nil {
		t.Fatalf("the name is not free at once: %v", err)
	}
	fresh := e.service.NewClient(name)
	if _, err := fresh.AddEntity(ctx, []byte(`{"PartitionKey":"p7","RowKey":"0000007","New":true}`), nil); err != nil {
		t.Fatal(err)
	}
	if rows, _ := listAll(t, fresh, nil); len(rows) != 1 {
		t.Errorf("the new table shows %d entities, want 1", len(rows))
	}

	count := func(id int64) int {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM entities WHERE table_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(oldID); n != total {
		t.Fatalf("before the purge the old table has %d rows", n)
	}
	cfg := store.PurgeConfig{Chunk: 25_000, Grace: 0}
	var purged, dropped int64
	start = time.Now()
	for pass := 0; dropped == 0; pass++ {
		if pass == 10 {
			t.Fatalf("purge not done after %d passes: %d entities, %d tables", pass, purged, dropped)
		}
		st, err := e.store.PurgeOnce(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		purged += st.Entities
		dropped += st.Tables
	}
	t.Logf("purged %d entities in %v", purged, time.Since(start))
	if purged != total || dropped != 1 {
		t.Errorf("purged %d entities and %d tables, want %d and 1", purged, dropped, total)
	}
	if n := count(oldID); n != 0 {
		t.Errorf("%d rows of the deleted table left", n)
	}
	var tombstones int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM tables WHERE id = $1`, oldID).Scan(&tombstones); err != nil || tombstones != 0 {
		t.Errorf("tombstone left: %d %v", tombstones, err)
	}
	got, err = fresh.GetEntity(ctx, "p7", "0000007", nil)
	if err != nil || !bytes.Contains(got.Value, []byte(`"New":true`)) {
		t.Errorf("the new table's entity after the purge: %v %s", err, got.Value)
	}
	m := e.metrics(t)
	for k, v := range map[string]float64{
		"pgtables_purge_entities_total": total,
		"pgtables_purge_tables_total":   1,
		"pgtables_purge_tables_pending": 0,
		"pgtables_purge_errors_total":   0,
	} {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	// One chunk per pass that deleted entities; the last pass drops the
	// tombstone.
	if n := m["pgtables_purge_chunk_seconds_count"]; n < 1 || m["pgtables_purge_chunk_seconds_sum"] <= 0 {
		t.Errorf("pgtables_purge_chunk_seconds: %v chunks, %v s", n, m["pgtables_purge_chunk_seconds_sum"])
	}
}
