package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/odata"
)

// The hash by which the router finds a shard is Citus's: these values are
// what worker_hash(bigint) answers on Citus 12.1. TestCitusRouterMatchesCitus
// checks many more against a cluster.
func TestCitusHash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    int64
		want int32
	}{
		{0, -272711505},
		{1, -1905060026},
		{-1, 385747274},
	} {
		if got := citusHash(tc.v); got != tc.want {
			t.Errorf("citusHash(%d) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// citusPlacement is where Citus itself places dkey: its hash, and the
// node of its shard's placement ("" for the coordinator).
func citusPlacement(t *testing.T, s *Store, dkey int64) (int32, string) {
	t.Helper()
	var h int32
	var host string
	var port int32
	var coord bool
	err := s.pool.QueryRow(context.Background(), `
SELECT worker_hash($1::bigint), n.nodename, n.nodeport, n.groupid = 0
FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
WHERE p.shardid = get_shard_id_for_distribution_column('entities', $1::bigint)
ORDER BY n.groupid LIMIT 1`, dkey).Scan(&h, &host, &port, &coord)
	if err != nil {
		t.Fatal(err)
	}
	if coord {
		return h, ""
	}
	return h, host + ":" + strconv.Itoa(int(port))
}

// routedAddr is the node the router sends dkey's statements to, "" for
// the coordinator.
func routedAddr(s *Store, dkey int64) string {
	if n := s.router.Load().lookup(dkey); n != nil {
		return n.addr
	}
	return ""
}

// The router's hash is Citus's, for keys at the edges of the ranges and
// at random, and the node it picks holds the key's shard.
func TestCitusRouterMatchesCitus(t *testing.T) {
	s := newCitusStore(t)
	if s.router.Load() == nil || s.router.Load().cur.Load() == nil {
		t.Fatal("no placements loaded on a distributed store")
	}
	keys := []int64{0, 1, -1, math.MinInt64, math.MaxInt64, math.MinInt32, math.MaxInt32, 1 << 32, -1 << 32,
		distributionKey(acct, "t", "p"), distributionKey(acct, "t", "")}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		keys = append(keys, int64(r.Uint64()))
	}
	nodes := map[string]int{}
	for _, k := range keys {
		h, addr := citusPlacement(t, s, k)
		if got := citusHash(k); got != h {
			t.Errorf("citusHash(%d) = %d, Citus: %d", k, got, h)
		}
		if got := routedAddr(s, k); got != addr {
			t.Errorf("key %d: routed to %q, Citus places it on %q", k, got, addr)
		}
		nodes[addr]++
	}
	if len(nodes) < 2 {
		t.Errorf("keys routed to %d node(s): %v; the cluster should spread them", len(nodes), nodes)
	}
}

// Single-partition statements run on the shard's node, over its pool, and
// answer as through the coordinator.
func TestCitusStatementsGoToTheShardsNode(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	n := s.route(acct, "t", "p")
	if n == nil {
		t.Skip("partition p's shard is on the coordinator")
	}
	before := n.pool.Stat().AcquireCount()
	if _, err := s.Write(ctx, acct, "t", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "r", Properties: props("N", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, acct, "t", &Write{Op: OpReplace, PartitionKey: "p", RowKey: "r", Properties: props("N", 2), Match: MatchAny}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Batch(ctx, acct, "t", []Write{{Op: OpInsert, PartitionKey: "p", RowKey: "b1"}, {Op: OpInsert, PartitionKey: "p", RowKey: "b2"}}); err != nil {
		t.Fatal(err)
	}
	// A batch that is not inserts only: each write in the transaction.
	if _, err := s.Batch(ctx, acct, "t", []Write{{Op: OpReplace, PartitionKey: "p", RowKey: "b1"}, {Op: OpMerge, PartitionKey: "p", RowKey: "b3"}, {Op: OpDelete, PartitionKey: "p", RowKey: "b3", Match: MatchAny}}); err != nil {
		t.Fatal(err)
	}
	e, err := s.GetEntity(ctx, acct, "t", "p", "r")
	if err != nil {
		t.Fatal(err)
	}
	got, err := odata.DecodeStored(e.Stored, nil)
	if err != nil || len(got) != 1 || got[0].Value.Int != 2 {
		t.Errorf("read back %v (%v), want N=2", got, err)
	}
	page, err := s.QueryEntities(ctx, acct, "t", EntityQuery{Filter: mustParse(t, "PartitionKey eq 'p'"), Top: 10})
	if err != nil || len(page.Entities) != 3 {
		t.Errorf("partition scan: %v entities (%v), want 3", page, err)
	}
	if _, err := s.Write(ctx, acct, "t", &Write{Op: OpDelete, PartitionKey: "p", RowKey: "r", Match: MatchAny}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEntity(ctx, acct, "t", "p", "r"); !errors.Is(err, ErrEntityNotFound) {
		t.Errorf("read after delete: %v", err)
	}
	if d := n.pool.Stat().AcquireCount() - before; d < 8 {
		t.Errorf("%d statements went to the shard's node %s, want every one of 8", d, n.addr)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A shard moves (citus_move_shard_placement) while writers and readers
// work on its partitions. The router's placements are held stale for the
// whole test: statements keep going to the shard's old node, which
// forwards them; every answer stays right, every acknowledged insert is
// stored, and a reload then routes to the new node.
func TestCitusShardMoveUnderLoad(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	// A colocation group of its own, so that the move takes this schema's
	// shard only, not those of the tests running beside it.
	if _, err := s.pool.Exec(ctx, `SELECT update_distributed_table_colocation('entities', colocate_with => 'none')`); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	r := s.router.Load()
	dk := distributionKey(acct, "t", "p0")
	from := routedAddr(s, dk)
	if from == "" {
		t.Skip("partition p0's shard is on the coordinator")
	}
	var shard int64
	var to string
	err := s.pool.QueryRow(ctx, `
SELECT get_shard_id_for_distribution_column('entities', $1::bigint),
       (SELECT nodename || ':' || nodeport FROM pg_dist_node
        WHERE groupid <> 0 AND noderole = 'primary' AND nodename || ':' || nodeport <> $2 ORDER BY nodeport LIMIT 1)`,
		dk, from).Scan(&shard, &to)
	if err != nil || to == "" {
		t.Fatalf("shard of p0 and a node to move it to: %v", err)
	}
	// block_writes, unless PGTABLES_TEST_SHARD_TRANSFER_MODE says otherwise:
	// with Citus 12.1's logical replication ("auto", "force_logical") a
	// few acknowledged inserts into the moving shard were lost in about
	// one run in four even with every statement sent to the coordinator,
	// and in one in two with routing (reported; not pgtables' to fix here).
	transferMode := cmp.Or(os.Getenv("PGTABLES_TEST_SHARD_TRANSFER_MODE"), "block_writes")
	// Stale on purpose: no reload until the test asks for one.
	r.cur.Store(&placements{ranges: r.cur.Load().ranges, loaded: time.Now().Add(time.Hour)})

	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		ops    atomic.Int64
		errsMu sync.Mutex
		errs   []error
	)
	fail := func(err error) {
		errsMu.Lock()
		errs = append(errs, err)
		errsMu.Unlock()
	}
	ackMu := sync.Mutex{}
	acked := map[string]time.Duration{}
	t0 := time.Now()
	for w := range 4 {
		wg.Go(func() {
			// Each writer owns its keys, so a read must see its last write.
			pk := "p" + strconv.Itoa(w%2) // p0 moves; p1 stays or moves too
			for i := 1; !stop.Load() && i <= 20000; i++ {
				rk := fmt.Sprintf("w%d-%d", w, i%5)
				if _, err := s.Write(ctx, acct, "t", &Write{Op: OpReplace, PartitionKey: pk, RowKey: rk, Properties: props("N", i)}); err != nil {
					fail(fmt.Errorf("upsert %s/%s: %w", pk, rk, err))
					continue
				}
				e, err := s.GetEntity(ctx, acct, "t", pk, rk)
				if err != nil {
					fail(fmt.Errorf("read %s/%s: %w", pk, rk, err))
					continue
				}
				got, err := odata.DecodeStored(e.Stored, nil)
				if err != nil || len(got) != 1 || got[0].Value.Int != int64(i) {
					fail(fmt.Errorf("read %s/%s: %v (%v), want N=%d", pk, rk, got, err, i))
				}
				irk := fmt.Sprintf("i%d-%d", w, i)
				if _, err := s.Write(ctx, acct, "t", &Write{Op: OpInsert, PartitionKey: pk, RowKey: irk}); err != nil {
					fail(fmt.Errorf("insert %s: %w", pk, err))
				} else {
					ackMu.Lock()
					acked[pk+"/"+irk] = time.Since(t0)
					ackMu.Unlock()
				}
				brk := fmt.Sprintf("b%d-%d", w, i)
				if _, err := s.Batch(ctx, acct, "t", []Write{{Op: OpInsert, PartitionKey: pk, RowKey: brk}}); err != nil {
					fail(fmt.Errorf("batch %s: %w", pk, err))
				} else {
					ackMu.Lock()
					acked[pk+"/"+brk] = time.Since(t0)
					ackMu.Unlock()
				}
				ops.Add(3)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	host, port, _ := strings.Cut(from, ":")
	toHost, toPort, _ := strings.Cut(to, ":")
	m0 := time.Since(t0)
	_, err = s.pool.Exec(ctx, `SELECT citus_move_shard_placement($1, $2, $3::int, $4, $5::int, shard_transfer_mode => $6)`, shard, host, port, toHost, toPort, transferMode)
	t.Logf("move from %v to %v", m0, time.Since(t0))
	moved := ops.Load()
	time.Sleep(500 * time.Millisecond)
	after := ops.Load() - moved
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("move shard %d from %s to %s: %v", shard, from, to, err)
	}
	for _, err := range errs {
		t.Error(err)
	}
	if got := routedAddr(s, dk); got != from {
		t.Fatalf("the placements were reloaded during the test (p0 now routed to %s)", got)
	}
	if after == 0 {
		t.Errorf("no operation ran after the move: the stale placement was not exercised")
	}
	t.Logf("%d operations, %d after the move of shard %d from %s to %s", ops.Load(), after, shard, from, to)
	stored, err := pgx.CollectRows(must(s.pool.Query(ctx, `SELECT pk || '/' || rk FROM entities WHERE rk LIKE 'b%' OR rk LIKE 'i%'`)), pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range stored {
		delete(acked, k)
	}
	for k, at := range acked {
		t.Errorf("acknowledged at %v, not stored: %s", at, k)
	}
	if err := r.load(ctx); err != nil {
		t.Fatal(err)
	}
	if got := routedAddr(s, dk); got != to {
		t.Errorf("after a reload p0 is routed to %q, want %q", got, to)
	}
}

// A coordinator URL without sslmode (libpq's prefer: TLS, then plain) gets
// to the nodes the same way: a node that refuses TLS is still routed to,
// not left out for the coordinator.
func TestCitusRoutesWithSSLModePrefer(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	u, err := url.Parse(s.pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("sslmode")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	p := detected(t, New(pool))
	defer p.Close()
	if err := p.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	n := p.route(acct, "t", "p")
	if n == nil {
		t.Skip("partition p's shard is on the coordinator")
	}
	if _, err := p.GetEntity(ctx, acct, "t", "p", "r"); !errors.Is(err, ErrEntityNotFound) {
		t.Fatalf("read: %v", err)
	}
	if n.pool.Stat().AcquireCount() == 0 || n.downUntil.Load() != 0 {
		t.Errorf("the read did not go to node %s (acquired %d, down until %d)", n.addr, n.pool.Stat().AcquireCount(), n.downUntil.Load())
	}
}

// A node that refuses connections (here: placements that name a port
// where nothing listens) gets its statements sent to the coordinator
// instead, which answers them, and is left out until the placements are
// loaded again.
func TestCitusUnreachableNodeFallsBack(t *testing.T) {
	s := newCitusStore(t)
	ctx := context.Background()
	if err := s.CreateTable(ctx, acct, "t"); err != nil {
		t.Fatal(err)
	}
	r := s.router.Load()
	dead, err := r.node("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	var ranges []shardRange
	for _, sr := range r.cur.Load().ranges {
		sr.node = dead
		ranges = append(ranges, sr)
	}
	r.cur.Store(&placements{ranges: ranges, loaded: time.Now().Add(time.Hour)})
	if s.route(acct, "t", "p") != dead {
		t.Fatal("the partition is not routed to the dead node")
	}
	// In this order: the read needs the insert's entity.
	for _, o := range []struct {
		name string
		op   func() error
	}{
		{"insert", func() error {
			_, err := s.Write(ctx, acct, "t", &Write{Op: OpInsert, PartitionKey: "p", RowKey: "r"})
			return err
		}},
		{"read", func() error { _, err := s.GetEntity(ctx, acct, "t", "p", "r"); return err }},
		{"batch", func() error {
			_, err := s.Batch(ctx, acct, "t", []Write{{Op: OpReplace, PartitionKey: "p", RowKey: "b"}, {Op: OpMerge, PartitionKey: "p", RowKey: "c"}})
			return err
		}},
		{"partition scan", func() error {
			_, err := s.QueryEntities(ctx, acct, "t", EntityQuery{Filter: mustParse(t, "PartitionKey eq 'p'"), Top: 10})
			return err
		}},
	} {
		name, op := o.name, o.op
		// Each op meets the node as not yet known to be down, and the
		// placements as before the reload that the last one started.
		for r.loading.Load() {
			time.Sleep(time.Millisecond)
		}
		r.cur.Store(&placements{ranges: ranges, loaded: time.Now().Add(time.Hour)})
		dead.downUntil.Store(0)
		if err := op(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if dead.downUntil.Load() == 0 {
			t.Errorf("%s: the node that refused it is not left out", name)
		}
	}
}
