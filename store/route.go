package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// On Citus a statement of one partition is sent to the node that holds the
// partition's shard rather than to the coordinator: Citus 11+ runs a
// distributed statement on any node, and on the shard's own node it runs
// it locally, where through the coordinator it costs the coordinator's
// planning and a second connection from there to the worker. The store
// computes the shard from the distribution key as Citus does
// (citusHash), finds its node in Citus's metadata, cached and refreshed
// every routeRefresh, and keeps a small pool per node.
//
// A stale placement, after a shard moved, is no error: the node that gets
// the statement forwards it to the shard's new node, as the coordinator
// would, and the next refresh routes straight again. A node that cannot
// be reached is left out until the next refresh, its statements going to
// the coordinator.

// routeRefresh is how old the cached placements may get before a lookup
// reloads them (in the background; lookups meanwhile use the old ones).
const routeRefresh = 5 * time.Second

// routeDown is how long a node that refused connections gets no
// statements.
const routeDown = 5 * time.Second

// sqlPlacements lists the shards of entities with their hash ranges and
// the node of one healthy placement, in hash order, and the name of the
// shard of changes colocated with each (NULL where changes is not
// distributed alike). entities::regclass follows the search_path, as the
// store's statements do.
const sqlPlacements = `
SELECT s.shardminvalue::integer, s.shardmaxvalue::integer, n.groupid = 0, n.nodename, n.nodeport,
  s.shardid, shard_name('entities'::regclass, s.shardid),
  (SELECT shard_name(c.logicalrelid, c.shardid) FROM pg_dist_shard c
   WHERE c.logicalrelid = to_regclass('changes') AND c.shardminvalue = s.shardminvalue)
FROM pg_dist_shard s
JOIN pg_dist_placement p ON p.shardid = s.shardid
JOIN pg_dist_node n ON n.groupid = p.groupid
WHERE s.logicalrelid = 'entities'::regclass AND p.shardstate = 1
  AND n.noderole = 'primary' AND n.isactive
ORDER BY 1, n.groupid`

// sqlTablesPlacements lists the nodes that hold a placement of the
// reference table tables, with the name of its shard there (schema
// qualified when not on the search_path's first schema).
const sqlTablesPlacements = `
SELECT shard_name('tables'::regclass, s.shardid), n.groupid = 0, n.nodename, n.nodeport
FROM pg_dist_shard s
JOIN pg_dist_placement p ON p.shardid = s.shardid
JOIN pg_dist_node n ON n.groupid = p.groupid
WHERE s.logicalrelid = 'tables'::regclass AND p.shardstate = 1
  AND n.noderole = 'primary' AND n.isactive`

// citusHash is the hash by which Citus places a bigint distribution
// value: PostgreSQL's hashint8, read as a signed 32-bit integer (Citus's
// worker_hash). hashint8 folds the high half into the low one, so that a
// value that fits in 32 bits hashes as the int4 would, and hashes that
// with hash_bytes_uint32 (Bob Jenkins' lookup3 "final" mix).
func citusHash(v int64) int32 {
	lo, hi := uint32(v), uint32(uint64(v)>>32)
	if v >= 0 {
		lo ^= hi
	} else {
		lo ^= ^hi
	}
	a := uint32(0x9e3779b9) + 4 + 3923095
	b, c := a, a
	a += lo
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return int32(c)
}

// A node is one Citus node that holds shards, with its pool and the
// combiners of the statements routed to it.
type node struct {
	addr          string
	pool          *pgxpool.Pool
	reads, writes *combiner
	downUntil     atomic.Int64 // unix nanoseconds; see routeDown
	// live is the table guard's statement on this node: on the node's
	// own placement of tables when it has one (see tableGuard).
	live atomic.Pointer[string]
}

// shardRange is the hash range of one shard and the node of its placement
// (nil: the coordinator).
type shardRange struct {
	min, max int32
	node     *node
	direct   *directRead // on node; nil: none (see citus_reads.go)
}

// placements is one load of the metadata.
type placements struct {
	ranges []shardRange
	loaded time.Time
}

// router maps distribution keys to nodes.
type router struct {
	base     *pgxpool.Config // the coordinator pool's, for the nodes' pools
	conns    int32           // per node
	combine  int
	coord    *pgxpool.Pool // where the metadata is read
	cur      atomic.Pointer[placements]
	loading  atomic.Bool
	closed   atomic.Bool
	mu       sync.Mutex
	nodes    map[string]*node
	loadHook func() // tests: after every load
	// acrossHook, tests: after every page read on the shards' nodes
	// (across_nodes.go).
	acrossHook func()
	// coordLive is where the coordinator's combiners read their table
	// guard's statement (see combiner.tableGuard).
	coordLive *atomic.Pointer[string]
}

// RouteConns is the default of Options.RouteConns for a pool of conns
// connections: half of them per node, at least 2. Requests spread over
// the nodes, so each gets a share of the coordinator pool's load.
func RouteConns(conns int) int { return max(2, conns/2) }

// startRouting sets up routing for a distributed schema and loads the
// placements once; a failed load leaves every statement on the
// coordinator until a later lookup loads them.
func (s *Store) startRouting(ctx context.Context) error {
	if s.opts.RouteConns < 0 || s.router.Load() != nil {
		return nil
	}
	conns := s.opts.RouteConns
	if conns == 0 {
		conns = RouteConns(int(s.pool.Config().MaxConns))
	}
	r := &router{base: s.pool.Config(), conns: int32(conns), combine: DefaultCombine(conns), coord: s.pool, nodes: map[string]*node{}, coordLive: &s.coordLive}
	if !s.router.CompareAndSwap(nil, r) {
		return nil
	}
	return r.load(ctx)
}

// Close cancels the index builds the store runs (each marked failed) and
// closes the pools of the nodes that routing opened; the pool the store
// was made with is the caller's to close.
func (s *Store) Close() {
	s.closeBuilds()
	if r := s.router.Load(); r != nil {
		r.close()
	}
}

func (r *router) close() {
	r.closed.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes {
		n.pool.Close()
	}
}

// load reads the placements from the coordinator.
func (r *router) load(ctx context.Context) error {
	tablesShard, local, err := r.loadTables(ctx)
	if err != nil {
		return err
	}
	rows, err := r.coord.Query(ctx, sqlPlacements)
	if err != nil {
		return classify(fmt.Errorf("load placements: %w", err))
	}
	type row struct {
		min, max int32
		coord    bool
		host     string
		port     int32
		shardID  int64
		shard    string
		changes  pgtype.Text
	}
	var found []row
	var x row
	_, err = pgx.ForEachRow(rows, []any{&x.min, &x.max, &x.coord, &x.host, &x.port, &x.shardID, &x.shard, &x.changes}, func() error {
		found = append(found, x)
		return nil
	})
	if err != nil {
		return classify(fmt.Errorf("load placements: %w", err))
	}
	p := &placements{loaded: time.Now()}
	for _, f := range found {
		if k := len(p.ranges); k > 0 && p.ranges[k-1].min == f.min {
			continue // another placement of the same shard
		}
		sr := shardRange{min: f.min, max: f.max}
		if !f.coord {
			if sr.node, err = r.node(f.host, uint16(f.port)); err != nil {
				return err
			}
			if _, ok := local[sr.node.addr]; ok {
				sr.direct = newDirectRead(f.shardID, f.shard, tablesShard)
				sr.direct.writes.changes = f.changes.String
			}
		}
		p.ranges = append(p.ranges, sr)
	}
	r.setGuards(local)
	r.cur.Store(p)
	if r.loadHook != nil {
		r.loadHook()
	}
	return nil
}

// loadTables reads the placements of tables: the name of its shard, and
// the nodes that hold a placement of it, by address ("": the
// coordinator), each with the table guard's statement there.
func (r *router) loadTables(ctx context.Context) (shard string, local map[string]string, err error) {
	rows, err := r.coord.Query(ctx, sqlTablesPlacements)
	if err != nil {
		return "", nil, classify(fmt.Errorf("load placements of tables: %w", err))
	}
	var host string
	var coord bool
	var port int32
	local = map[string]string{}
	_, err = pgx.ForEachRow(rows, []any{&shard, &coord, &host, &port}, func() error {
		addr := ""
		if !coord {
			addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		local[addr] = shardGuard(shard)
		return nil
	})
	if err != nil {
		return "", nil, classify(fmt.Errorf("load placements of tables: %w", err))
	}
	return shard, local, nil
}

// setGuards sets the table guard's statement of every node, and of the
// coordinator: on the node's placement of tables, read as a table of its
// own, when it has one (local, from loadTables); else through Citus.
func (r *router) setGuards(local map[string]string) {
	setLive := func(p *atomic.Pointer[string], addr string) {
		if sql, ok := local[addr]; ok {
			p.Store(&sql)
		} else {
			p.Store(nil)
		}
	}
	setLive(r.coordLive, "")
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, n := range r.nodes {
		setLive(&n.live, addr)
	}
}

// node returns the node at host:port, with a pool made on first use.
func (r *router) node(host string, port uint16) (*node, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.nodes[addr]; n != nil {
		return n, nil
	}
	if r.closed.Load() {
		return nil, errors.New("load placements: store closed")
	}
	cfg := r.base.Copy()
	// The same ways of connecting (with TLS, then without, as sslmode
	// prefer says), to the node's address; a fallback to another host of
	// the coordinator's URL is one more way to the node.
	// TLS verifies the node's name, not the coordinator's.
	forNode := func(c *tls.Config) *tls.Config {
		if c == nil || c.ServerName == "" {
			return c
		}
		c = c.Clone()
		c.ServerName = host
		return c
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, port
	cfg.ConnConfig.TLSConfig = forNode(cfg.ConnConfig.TLSConfig)
	var fallbacks []*pgconn.FallbackConfig
	seen := map[bool]bool{cfg.ConnConfig.TLSConfig != nil: true}
	for _, fb := range cfg.ConnConfig.Fallbacks {
		if withTLS := fb.TLSConfig != nil; !seen[withTLS] {
			seen[withTLS] = true
			fallbacks = append(fallbacks, &pgconn.FallbackConfig{Host: host, Port: port, TLSConfig: forNode(fb.TLSConfig)})
		}
	}
	cfg.ConnConfig.Fallbacks = fallbacks
	cfg.MaxConns = r.conns
	// On the node of a partition's shard Citus executes a write locally,
	// and evaluates live_table_id (migration 0004) in that execution: a
	// read of the reference table tables nested in a statement on a shard,
	// which it refuses unless allowed (inside a transaction, once the
	// statement's plan is cached). What it guards against is a nested
	// query reading shards that move meanwhile; a reference table has a
	// placement on every node and never moves.
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["citus.allow_nested_distributed_execution"] = "on"
	cfg.MinConns = 0
	// pgxpool.NewWithConfig connects lazily: a node that does not answer
	// fails its statements' acquire, not this.
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("pool for node %s: %w", addr, err)
	}
	n := &node{addr: addr, pool: pool}
	n.reads = newCombinerOn(pool, r.combine, int(r.conns)/2)
	n.writes = newCombinerOn(pool, r.combine, int(r.conns)/2)
	n.reads.live, n.writes.live = &n.live, &n.live
	r.nodes[addr] = n
	return n, nil
}

// lookup returns the node of the shard that holds dkey, or nil for the
// coordinator (no placements yet, the shard is there, or its node is
// down). Placements older than routeRefresh are reloaded in the
// background.
func (r *router) lookup(dkey int64) *node {
	n, _, _ := r.placeRange(dkey)
	return n
}

// placeRange is lookup that also returns the shard's hash range, with ok
// false when no loaded placement covers dkey.
func (r *router) placeRange(dkey int64) (n *node, sr shardRange, ok bool) {
	p := r.cur.Load()
	if p == nil || time.Since(p.loaded) > routeRefresh {
		r.refresh()
		if p == nil {
			return nil, shardRange{}, false
		}
	}
	h := citusHash(dkey)
	i, _ := slices.BinarySearchFunc(p.ranges, h, func(sr shardRange, h int32) int {
		switch {
		case sr.max < h:
			return -1
		case sr.min > h:
			return 1
		}
		return 0
	})
	if i == len(p.ranges) || p.ranges[i].min > h || p.ranges[i].max < h {
		return nil, shardRange{}, false
	}
	sr = p.ranges[i]
	n = sr.node
	if n != nil && n.downUntil.Load() > time.Now().UnixNano() {
		n = nil
	}
	return n, sr, true
}

// refresh reloads the placements in the background, once at a time.
func (r *router) refresh() {
	if r.closed.Load() || !r.loading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.loading.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.load(ctx) // the old placements stay; the next lookup tries again
	}()
}

// failed takes note of a routed statement's error: a node that refused a
// connection is left out for routeDown, and the placements are reloaded,
// since the node may have left the cluster. It reports whether the
// statement never reached the node, so that it may go to the coordinator.
func (r *router) failed(n *node, err error) bool {
	var connectErr *pgconn.ConnectError
	if !errors.As(err, &connectErr) {
		if unavailable(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			r.refresh()
		}
		return false
	}
	n.downUntil.Store(time.Now().Add(routeDown).UnixNano())
	r.refresh()
	return true
}

// route returns the node that the statements of one partition go to, or
// nil for the coordinator.
func (s *Store) route(account, lt, pk string) *node {
	r := s.router.Load()
	if r == nil {
		return nil
	}
	return r.lookup(distributionKey(account, lt, pk))
}

// routed runs fn with the combiners and pool of the partition's node, and
// again with the coordinator's when the node could not be reached.
func (s *Store) routed(account, lt, pk string, fn func(reads, writes *combiner, pool *pgxpool.Pool) error) error {
	return s.routedTo(s.route(account, lt, pk), fn)
}

// routedTo is routed with the partition's node already looked up (nil:
// the coordinator).
func (s *Store) routedTo(n *node, fn func(reads, writes *combiner, pool *pgxpool.Pool) error) error {
	if n != nil {
		err := fn(n.reads, n.writes, n.pool)
		if err == nil || !s.router.Load().failed(n, err) {
			return err
		}
	}
	return fn(s.reads, s.writes, s.pool)
}
