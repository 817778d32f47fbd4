package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/store"
)

// What only a Citus cluster can show (PGTABLES_TEST_BACKEND=citus, as CI's
// second pass runs the suite): where the rows are, and what happens when a
// worker's connection is cut, a worker is unreachable or a shard moves. On
// PostgreSQL there are no shards to look at: testdb.NeedCitus skips them.

// needWorkers skips a test that cuts or moves a worker's share when the
// shards have fewer than two nodes apart from the coordinator (a
// single-node Citus, as the container of testdb is, has none).
func needWorkers(t *testing.T, e *env) {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(bg, `SELECT count(*) FROM pg_dist_node WHERE groupid <> 0 AND shouldhaveshards AND isactive`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Skipf("needs two workers apart from the coordinator; this cluster has %d", n)
	}
}

// addPartitions writes n partitions p000.. of per entities each, a batch a
// partition.
func addPartitions(t *testing.T, c *aztables.Client, n, per int) {
	t.Helper()
	for p := range n {
		var acts []aztables.TransactionAction
		for r := range per {
			acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
				Entity: batchEntity(t, fmt.Sprintf("p%03d", p), fmt.Sprintf("r%03d", r), map[string]any{"V": r})})
		}
		if _, err := c.SubmitTransaction(bg, acts, nil); err != nil {
			t.Fatalf("partition %d: %v", p, err)
		}
	}
}

// tableID is the id of a live table.
func (e *env) tableID(t *testing.T, table string) int64 {
	t.Helper()
	var id int64
	if err := e.pool.QueryRow(bg, `SELECT id FROM tables WHERE lname = lower($1) AND deleted_at IS NULL`, table).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestCitusDistribution reads each shard of entities itself: every
// partition lies in one shard, and the partitions of one table on every
// worker.
func TestCitusDistribution(t *testing.T) {
	testdb.NeedCitus(t)
	t.Parallel()
	e := newEnv(t)
	c, table := e.newTable()
	const parts = 40
	addPartitions(t, c, parts, 3)
	id := e.tableID(t, table)
	shardOf := map[string]int{} // partition -> how many shards hold it
	byNode := map[int]int{}     // worker port -> partitions
	shards := 0
	rows, err := e.pool.Query(bg, fmt.Sprintf(`
SELECT s.nodeport, r.result FROM run_command_on_shards('entities',
    $$SELECT coalesce(string_agg(DISTINCT pk, '|'), '') FROM %%s WHERE table_id = %d$$) r
JOIN citus_shards s ON s.shardid = r.shardid AND s.table_name = 'entities'::regclass
WHERE r.success`, id))
	if err != nil {
		t.Fatal(err)
	}
	var port int
	var pks string
	if _, err := pgx.ForEachRow(rows, []any{&port, &pks}, func() error {
		shards++
		for _, pk := range strings.Split(pks, "|") {
			if pk != "" {
				shardOf[pk]++
				byNode[port]++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if shards < 2 {
		t.Fatalf("entities has %d shards", shards)
	}
	if len(shardOf) != parts {
		t.Errorf("the shards hold %d partitions, want %d", len(shardOf), parts)
	}
	for pk, n := range shardOf {
		if n != 1 {
			t.Errorf("partition %s lies in %d shards", pk, n)
		}
	}
	var workers int
	if err := e.pool.QueryRow(bg, `SELECT count(*) FROM pg_dist_node WHERE shouldhaveshards AND isactive`).Scan(&workers); err != nil {
		t.Fatal(err)
	}
	if len(byNode) != workers {
		t.Errorf("the table's partitions lie on %d of %d nodes: %v", len(byNode), workers, byNode)
	}
	t.Logf("%d partitions in %d shards, by node port: %v", len(shardOf), shards, byNode)
}

// TestCitusBatchWorkerConnectionCut terminates, on the worker, the backend
// that runs a batch's statements, while the batch waits there for a row the
// test holds. The client is told of the failure (a retryable 503), and the
// partition holds all of the batch or none of it: none, as it never got
// past the held row.
//
// The connection it cuts is the coordinator's to the worker: the store
// sends everything through the coordinator here (no routing).
func TestCitusBatchWorkerConnectionCut(t *testing.T) {
	testdb.NeedCitus(t)
	t.Parallel()
	e := newEnvWith(t, store.Options{RouteConns: -1})
	needWorkers(t, e)
	ctx := context.Background()
	c, table := e.newTable()
	rk := func(i int) string { return fmt.Sprintf("r%03d", i) }
	const existing, total = 20, 40
	for _, held := range []int{0, 7, existing - 1} {
		t.Run(fmt.Sprintf("Held%d", held), func(t *testing.T) {
			pk := fmt.Sprintf("cut%d", held)
			var seed []aztables.TransactionAction
			for i := range existing {
				seed = append(seed, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
					Entity: batchEntity(t, pk, rk(i), map[string]any{"V": 0})})
			}
			if _, err := c.SubmitTransaction(ctx, seed, nil); err != nil {
				t.Fatal(err)
			}
			holder, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig.Copy())
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close(ctx)
			tx, err := holder.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck
			lockEntity(t, tx, table, pk, rk(held))
			var gpid int64
			if err := tx.QueryRow(ctx, `SELECT citus_backend_gpid()`).Scan(&gpid); err != nil {
				t.Fatal(err)
			}

			var acts []aztables.TransactionAction
			for i := range total {
				acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace,
					Entity: batchEntity(t, pk, rk(i), map[string]any{"V": 1})})
			}
			done := make(chan error, 1)
			go func() { _, err := c.SubmitTransaction(ctx, acts, nil); done <- err }()

			// The batch's statement waits on a worker, in a backend of its
			// own there: find it, and the worker.
			var host string
			var port, pid int
			for deadline := time.Now().Add(20 * time.Second); ; {
				err := e.pool.QueryRow(ctx, `
SELECT n.nodename, n.nodeport, a.pid FROM citus_lock_waits w
JOIN citus_stat_activity a ON a.global_pid = w.waiting_gpid AND a.is_worker_query AND a.wait_event_type = 'Lock'
JOIN pg_dist_node n ON n.nodeid = a.nodeid
WHERE w.blocking_gpid = $1 LIMIT 1`, gpid).Scan(&host, &port, &pid)
				if err == nil {
					break
				}
				if err != pgx.ErrNoRows {
					t.Fatal(err)
				}
				select {
				case err := <-done:
					t.Fatalf("the batch finished while its row was held: %v", err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("the batch never waited on a worker for the held row")
				}
				time.Sleep(5 * time.Millisecond)
			}
			wcfg := e.pool.Config().ConnConfig.Copy()
			// Every attempt goes to the worker: sslmode=prefer's fallback
			// without TLS would otherwise reach the coordinator.
			wcfg.Host, wcfg.Port = host, uint16(port)
			for _, f := range wcfg.Fallbacks {
				f.Host, f.Port = host, uint16(port)
			}
			worker, err := pgx.ConnectConfig(ctx, wcfg)
			if err != nil {
				t.Fatal(err)
			}
			defer worker.Close(ctx)
			if !terminate(t, worker, int32(pid)) {
				t.Fatalf("no backend %d on the worker at %s:%d", pid, host, port)
			}

			err = <-done
			if status, code := txFailure(err); err == nil || status != http.StatusServiceUnavailable || code != "ServerBusy" {
				t.Errorf("a batch whose worker connection was cut: %d %s (%v), want 503 ServerBusy", status, code, err)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			got := listAllRaw(t, c, pk)
			if len(got) != existing {
				t.Fatalf("partition holds %d entities after the cut batch, want the %d it had", len(got), existing)
			}
			for _, v := range got {
				if fmt.Sprint(v) != "0" {
					t.Fatalf("partition holds part of the cut batch: V = %v", got)
				}
			}
			// The partition takes the batch once the connection is back.
			if _, err := c.SubmitTransaction(ctx, acts, nil); err != nil {
				t.Fatalf("the batch again: %v", err)
			}
		})
	}
}

// listAllRaw returns the V of every entity of partition pk.
func listAllRaw(t *testing.T, c *aztables.Client, pk string) []any {
	t.Helper()
	ents, _ := listAll(t, c, &aztables.ListEntitiesOptions{Filter: to.Ptr(fmt.Sprintf("PartitionKey eq '%s'", pk))})
	var vs []any
	for _, e := range ents {
		vs = append(vs, e["V"])
	}
	return vs
}

// TestCitusETagsAcrossShardMove moves the shard of a partition to the
// other worker. Its entities are intact; an ETag read before the move
// matches at most its own version (a write with it may fail once with 412,
// spuriously, as the row's xmin changes with the move) and never another
// version.
func TestCitusETagsAcrossShardMove(t *testing.T) {
	testdb.NeedCitus(t)
	t.Parallel()
	e := newEnv(t)
	needWorkers(t, e)
	ctx := context.Background()
	// Alone in its colocation group, so that the move takes no other test's
	// shards with it.
	if _, err := e.pool.Exec(ctx, `SELECT update_distributed_table_colocation('entities', colocate_with => 'none')`); err != nil {
		t.Fatal(err)
	}
	c, table := e.newTable()
	props := map[string]any{"S": "text", "N": int32(7), "D": 2.5, "B": true}
	etags := map[string]azcore.ETag{}
	for _, rk := range []string{"a", "b", "c"} {
		r, err := c.AddEntity(ctx, entity(t, "p", rk, props), nil)
		if err != nil {
			t.Fatal(err)
		}
		etags[rk] = r.ETag
	}
	// c gets a second version before the move; its first ETag is stale.
	stale := etags["c"]
	up, err := c.UpdateEntity(ctx, entity(t, "p", "c", map[string]any{"S": "second"}), &aztables.UpdateEntityOptions{IfMatch: &stale, UpdateMode: aztables.UpdateModeMerge})
	if err != nil {
		t.Fatal(err)
	}
	etags["c"] = up.ETag

	var shard int64
	var host string
	var from int
	if err := e.pool.QueryRow(ctx, `
SELECT s.shardid, s.nodename, s.nodeport FROM tables t
JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('entities', entity_dkey(t.account, t.lname, 'p'))
WHERE t.lname = lower($1) AND t.deleted_at IS NULL`, table).Scan(&shard, &host, &from); err != nil {
		t.Fatal(err)
	}
	var to int
	if err := e.pool.QueryRow(ctx, `SELECT nodeport FROM pg_dist_node WHERE shouldhaveshards AND isactive AND nodeport <> $1 LIMIT 1`, from).Scan(&to); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `SELECT citus_move_shard_placement($1, $2, $3, $2, $4, 'block_writes')`, shard, host, from, to); err != nil {
		t.Fatalf("move shard %d from %d to %d: %v", shard, from, to, err)
	}
	t.Logf("moved shard %d of partition p from port %d to %d", shard, from, to)

	// The data is intact.
	wantProps(t, c, "p", "a", props)
	wantProps(t, c, "p", "b", props)
	wantProps(t, c, "p", "c", map[string]any{"S": "second", "N": int32(7), "D": 2.5, "B": true})

	// The first version's ETag of c never matches its second version.
	_, err = c.UpdateEntity(ctx, entity(t, "p", "c", map[string]any{"S": "third"}), &aztables.UpdateEntityOptions{IfMatch: &stale, UpdateMode: aztables.UpdateModeMerge})
	wantRespErr(t, err, 412, "UpdateConditionNotSatisfied")

	// A current ETag works, or fails once with 412; after a read, the
	// ETag read works.
	for _, rk := range []string{"a", "b", "c"} {
		tag := etags[rk]
		_, err := c.UpdateEntity(ctx, entity(t, "p", rk, map[string]any{"After": true}), &aztables.UpdateEntityOptions{IfMatch: &tag, UpdateMode: aztables.UpdateModeMerge})
		if err == nil {
			continue
		}
		wantRespErr(t, err, 412, "UpdateConditionNotSatisfied")
		_, fresh := getEDM(t, c, "p", rk)
		if fresh == tag {
			t.Errorf("%s: the ETag read after the move is the one refused", rk)
		}
		if _, err := c.UpdateEntity(ctx, entity(t, "p", rk, map[string]any{"After": true}), &aztables.UpdateEntityOptions{IfMatch: &fresh, UpdateMode: aztables.UpdateModeMerge}); err != nil {
			t.Errorf("%s: the ETag read after the move: %v", rk, err)
		}
	}
	for _, rk := range []string{"a", "b", "c"} {
		ent, _ := getEDM(t, c, "p", rk)
		if ent.Properties["After"] != true {
			t.Errorf("%s: %v", rk, ent.Properties)
		}
	}
}

// TestScanAcrossPartitions pages through 3,000 entities in 150 partitions,
// with no filter and with a filter across partitions, with the SDK's
// default pages and with small ones: every entity exactly once, in
// PartitionKey, RowKey order. On Citus every page fans out to all shards.
func TestScanAcrossPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	const parts, per = 150, 20
	addPartitions(t, c, parts, per)
	for _, tc := range []struct {
		name   string
		opts   *aztables.ListEntitiesOptions
		filter func(pk, rk string) bool
	}{
		{"All", nil, func(string, string) bool { return true }},
		{"Top70", &aztables.ListEntitiesOptions{Top: to.Ptr[int32](70)}, func(string, string) bool { return true }},
		{"RowKeyFilter", &aztables.ListEntitiesOptions{Filter: to.Ptr("RowKey ge 'r015' or PartitionKey lt 'p003'")},
			func(pk, rk string) bool { return rk >= "r015" || pk < "p003" }},
		{"PropertyFilterTop", &aztables.ListEntitiesOptions{Filter: to.Ptr("V eq 3"), Top: to.Ptr[int32](40)},
			func(pk, rk string) bool { return rk == "r003" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for p := range parts {
				for r := range per {
					pk, rk := fmt.Sprintf("p%03d", p), fmt.Sprintf("r%03d", r)
					if tc.filter(pk, rk) {
						want = append(want, pk+"/"+rk)
					}
				}
			}
			ents, pages := listAll(t, c, tc.opts)
			got := make([]string, len(ents))
			for i, ent := range ents {
				got[i] = fmt.Sprint(ent["PartitionKey"], "/", ent["RowKey"])
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d entities, want %d, in order; first difference near %v", len(got), len(want), firstDiff(got, want))
			}
			limit := 1000
			if tc.opts != nil && tc.opts.Top != nil {
				limit = int(*tc.opts.Top)
			}
			for i, n := range pages {
				if n > limit {
					t.Errorf("page %d has %d entities, over %d", i, n, limit)
				}
			}
			t.Logf("%d entities in %d pages", len(got), len(pages))
		})
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("#%d: %s vs %s", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(a), len(b))
}

// deadPort is a port where no node listens.
const deadPort = 1

// TestCitusWorkerUnreachable makes one worker refuse connections while the
// server runs: requests for the partitions on it get a retryable 503
// ServerBusy, never a 500, and nothing is half written; once the worker
// takes connections again, they succeed. It runs alone (not in parallel),
// since the other tests share the cluster, and so must other test
// processes on it (go test -p 1): DDL waits for the nodes' metadata.
//
// The worker is "down" only in the metadata, which the coordinator's
// statements follow; a store that routes would go on reaching the live
// worker until its next refresh, so this one sends everything through
// the coordinator. The store's own tests cover a routed node that refuses
// connections (TestCitusUnreachableNodeFallsBack).
func TestCitusWorkerUnreachable(t *testing.T) {
	testdb.NeedCitus(t)
	e := newEnvWith(t, store.Options{RouteConns: -1})
	needWorkers(t, e)
	ctx := context.Background()
	c, table := e.newTable()
	addPartitions(t, c, 8, 2)
	// A partition on the first worker, and that worker.
	var pk, host string
	var port int
	if err := e.pool.QueryRow(ctx, `
SELECT p, s.nodename, s.nodeport FROM tables t
CROSS JOIN unnest(ARRAY['p000', 'p001', 'p002', 'p003', 'p004', 'p005', 'p006', 'p007']) p
JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('entities', entity_dkey(t.account, t.lname, p))
WHERE t.lname = lower($1) AND t.deleted_at IS NULL
ORDER BY s.nodeport, p LIMIT 1`, table).Scan(&pk, &host, &port); err != nil {
		t.Fatal(err)
	}
	// The cluster's metadata points at a port where nothing listens:
	// every connection to that worker is refused, as when it is down.
	move := func(from, to int) {
		t.Helper()
		if _, err := e.pool.Exec(ctx, `SELECT citus_update_node(nodeid, nodename, $3) FROM pg_dist_node WHERE nodename = $1 AND nodeport = $2`,
			host, from, to); err != nil {
			t.Fatal(err)
		}
	}
	// Back, and the nodes' copies of the metadata in step again (Citus
	// syncs them in the background), before other tests use the cluster.
	restore := func() {
		t.Helper()
		move(deadPort, port) // a no-op once moved back
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			var stale int
			if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_dist_node WHERE hasmetadata AND NOT metadatasynced`).Scan(&stale); err != nil {
				t.Fatal(err)
			}
			if stale == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d nodes' metadata still out of sync", stale)
			}
		}
	}
	before := e.tableSnapshot(table)
	move(port, deadPort)
	t.Cleanup(restore)
	path := e.entityPath(table, pk, "r000")
	for _, req := range []rawReq{
		{method: "GET", path: path},
		{method: "PUT", path: path, body: []byte(`{"V":9}`), header: map[string]string{"If-Match": "*"}},
		{method: "MERGE", path: e.entityPath(table, pk, "new"), body: []byte(`{"V":9}`)},
		{method: "GET", path: e.tablePath(table) + "()?$filter=PartitionKey%20eq%20'" + pk + "'"},
	} {
		r := e.send(req)
		wantError(t, r, http.StatusServiceUnavailable, "ServerBusy")
	}
	var acts []aztables.TransactionAction
	for _, rk := range []string{"r000", "r001", "x"} {
		acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertMerge, Entity: batchEntity(t, pk, rk, map[string]any{"V": 9})})
	}
	_, err := c.SubmitTransaction(ctx, acts, nil)
	if status, code := txFailure(err); err == nil || status != http.StatusServiceUnavailable || code != "ServerBusy" {
		t.Errorf("batch on an unreachable worker: %d %s (%v), want 503 ServerBusy", status, code, err)
	}
	restore()
	if e.tableSnapshot(table) != before {
		t.Error("requests refused with 503 wrote")
	}
	if _, err := c.SubmitTransaction(ctx, acts, nil); err != nil {
		t.Errorf("the batch once the worker is back: %v", err)
	}
	wantStatus(t, e.send(rawReq{method: "GET", path: path}), 200)
}
