package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgtables/pgtables/odata"
)

// On Citus a page of a filter across partitions, or of no filter or key
// conditions only (a scan of the table), reads every shard, and through
// the coordinator that cost twice
// the nodes' CPU of reading the shards themselves (pgtables-bench
// filter-scan, 10,000 entities, 100 matches a page: the coordinator 4.7
// ms and the workers 17 ms a page through Citus, where a worker's shards
// read directly cost it about 5 ms): Citus deparses, plans and runs a task
// per shard, each planned again on its worker, and merges their rows on
// the coordinator. So where every shard's placement has a direct read
// (citus_reads.go), a page is one plain PostgreSQL statement per node on
// that node's placements, a UNION ALL of one ordered, limited statement a
// shard, which PostgreSQL plans once per connection as a merge of the
// shards' primary key walks; pgtables merges the nodes' ordered rows. One
// connection per node for each request bounds the fan-out. A page that a
// property index serves gains most: through the coordinator it took a
// transaction of four round trips, the coordinator's planning and its copy
// of every row, and the shard statements one after the other on each node,
// about 12 ms of the coordinator's CPU for a page of 1,000 entities that
// the shards' indexes find in a few milliseconds.
//
// Each node's statement checks in its snapshot, as a point read on a
// placement does, that the table id (from the cache of tableids.go) is
// still live, and that every shard it reads is still the node's in Citus's
// metadata. When either fails, a placement's table is gone, or a node
// cannot be reached, the page goes through Citus as before (acrossPage),
// which finds the table by name; the placements are reloaded. The nodes'
// statements are separate snapshots, as Citus's tasks of one statement on
// different nodes are too.

// sqlAcrossNodesHead begins the statement of one node (see acrossNodesSQL).
const sqlAcrossNodesHead = `
SELECT g.live, g.here, u.pk, u.rk, u.ts, u.xmin, u.props`

// acrossNodesSQL is the statement of a page on a node's placements
// shards, whose placement of tables is named tables: the shards' rows
// are those of table id table ($1, or the id itself: genericIndexPlan),
// rest is what follows the table id's condition in sqlAcrossPage (further
// conditions, order and limit), applied on each shard; top the page's
// size.
func acrossNodesSQL(shards []*directRead, table, rest string, top int) string {
	var b strings.Builder
	b.WriteString(sqlAcrossNodesHead)
	// live is an output, or the planner would drop its division.
	b.WriteString(`
FROM (SELECT 1 / count(*) AS live, (SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_local_group l ON l.groupid = p.groupid
  WHERE p.shardid IN (`)
	for i, d := range shards {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(d.id, 10))
	}
	b.WriteString(`) AND p.shardstate = 1) = ` + strconv.Itoa(len(shards)) + ` AS here
  FROM ` + shards[0].tables + ` WHERE id = $1 AND deleted_at IS NULL) g
LEFT JOIN (SELECT * FROM (`)
	for i, d := range shards {
		if i > 0 {
			b.WriteString("\nUNION ALL ")
		}
		b.WriteString(`(SELECT e.pk, e.rk, e.ts, e.xmin, e.props::text FROM ` + d.shard + ` e
WHERE e.table_id = ` + table + rest + `)`)
	}
	b.WriteString(`) u ORDER BY u.pk, u.rk LIMIT ` + strconv.Itoa(top+1) + `) u ON true`)
	return b.String()
}

// nodeShards groups the shards of loaded placements by node, in the order
// of their first shard, when every shard has a direct read on a node that
// is up; else it returns nil.
func nodeShards(p *placements, upAt int64) (nodes []*node, shards [][]*directRead) {
	if p == nil || len(p.ranges) == 0 {
		return nil, nil
	}
	at := map[*node]int{}
	for _, sr := range p.ranges {
		if sr.node == nil || sr.direct == nil || sr.node.downUntil.Load() > upAt {
			return nil, nil
		}
		i, ok := at[sr.node]
		if !ok {
			i = len(nodes)
			at[sr.node] = i
			nodes, shards = append(nodes, sr.node), append(shards, nil)
		}
		shards[i] = append(shards[i], sr.direct)
	}
	return nodes, shards
}

// nodeRow is one entity row of a node's answer: its entity, written
// already when ready (see readNode), or else the row's fields.
type nodeRow struct {
	pk, rk string
	ts     int64
	xmin   uint32
	props  []byte
	size   int // of the stored properties
	entity odata.Entity
	ready  bool
}

// nodeAnswer is what one node's statement gave.
type nodeAnswer struct {
	rows []nodeRow
	here bool
	err  error
}

// acrossNodes runs a page across partitions as one statement per node
// (see above). ok is false when it did not apply or found its placements
// or table id stale: the caller then goes through Citus.
func (s *Store) acrossNodes(ctx context.Context, account, table string, q EntityQuery) (page *EntityPage, ok bool, err error) {
	if q.Filter == nil && q.HasFromPK && strings.IndexByte(q.FromPK, 0) < 0 && strings.IndexByte(q.FromPK, 1) < 0 {
		return s.scanFromPartition(ctx, account, table, q)
	}
	return s.acrossNodesOf(ctx, account, table, q, pageStatement{}, 0)
}

// scanFromPartition runs a continued page of a scan of the table on the
// nodes in two steps, as spreadPage does through Citus: the rest of the
// continuation's partition on its shard's placement (partitionOnNode),
// then, when the page is not full, the partitions after it on every node.
// Each node's statement reads up to a page of rows, of which the merge
// keeps about half; a scan of large partitions mostly ends in the first
// step, on one node. The keys of q.FromPK's partition, as a continuation
// gives them, are stored keys: one that the stored form maps (it holds
// U+0001) may not be its partition's key, and takes one step instead.
func (s *Store) scanFromPartition(ctx context.Context, account, table string, q EntityQuery) (page *EntityPage, ok bool, err error) {
	head, ok, err := s.partitionOnNode(ctx, account, table, q.FromPK, q, pageStatement{pin: q.FromPK, hasPin: true})
	if !ok || err != nil || head.More {
		return head, ok, err
	}
	rest := q
	rest.Top = q.Top - len(head.Entities)
	tail, ok, err := s.acrossNodesOf(ctx, account, table, rest, pageStatement{afterPK: q.FromPK, hasAfterPK: true}, head.stored)
	if !ok || err != nil {
		return tail, ok, err
	}
	head.Entities = append(head.Entities, tail.Entities...)
	head.More, head.NextPK, head.NextRK = tail.More, tail.NextPK, tail.NextRK
	return head, true, nil
}

// acrossNodesOf is acrossNodes for one statement st of a page (see
// acrossWhereOf), after bytes of the page's properties.
func (s *Store) acrossNodesOf(ctx context.Context, account, table string, q EntityQuery, st pageStatement, bytes int) (page *EntityPage, ok bool, err error) {
	rt := s.router.Load()
	if rt == nil {
		return nil, false, nil
	}
	nodes, shards := nodeShards(rt.cur.Load(), time.Now().UnixNano())
	if nodes == nil {
		return nil, false, nil
	}
	return s.readNodes(ctx, rt, account, table, q, st, bytes, nodes, shards)
}

// readNodes runs statement st of a page of q on the shards' placements,
// shards[i] on nodes[i], in parallel, and merges their rows after bytes of
// the page's properties; ok as acrossNodes says.
func (s *Store) readNodes(ctx context.Context, rt *router, account, table string, q EntityQuery, st pageStatement, bytes int, nodes []*node, shards [][]*directRead) (page *EntityPage, ok bool, err error) {
	lt := tableKey(table)
	id, err := s.liveTableID(ctx, account, lt)
	if err != nil {
		return nil, false, nil // through Citus, which tells a missing table
	}
	generic := genericIndexPlan(q)
	ofTable := "$1"
	if generic {
		ofTable = strconv.FormatInt(id, 10)
	}
	rest, args, err := acrossWhereOf(id, q, st, generic)
	if err != nil {
		return &EntityPage{}, true, err
	}
	answers := make([]nodeAnswer, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = readNode(ctx, n, acrossNodesSQL(shards[i], ofTable, rest, q.Top), args, q.Encode, (q.Top+1)/len(nodes)+1)
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if ok, err := s.nodeAnswered(rt, nodes[i], a, account, lt, id); !ok || err != nil {
			return &EntityPage{}, ok, err
		}
	}
	if h := rt.acrossHook; h != nil {
		h()
	}
	return mergeNodes(answers, q.rows(), bytes), true, nil
}

// nodeAnswered tells what a node's answer to a page's statement on its
// placements of table id means for the page: ok false when the table id
// or the placements were stale or the node could not be reached (the
// page then goes through Citus), and the page's error when the node
// failed otherwise.
func (s *Store) nodeAnswered(rt *router, n *node, a nodeAnswer, account, lt string, id int64) (ok bool, err error) {
	switch {
	case tableGone(a.err):
		s.tableIDs.forget(account, lt, id)
		return false, nil
	case shardGone(a.err) || a.err == nil && !a.here:
		rt.refresh()
		return false, nil
	case a.err != nil && rt.failed(n, a.err):
		return false, nil
	case a.err != nil:
		// A node's rows alone are no prefix of the page.
		return true, classify(fmt.Errorf("query entities: %w", a.err))
	}
	return true, nil
}

// partitionOnNode runs a page of one partition (the filter pins pk) on
// its shard's placement, one statement on the shard's node, as a node's
// statement of a page across partitions but on that shard alone. Through
// Citus, even on the partition's node, the page's statement joins the
// reference table tables, which Citus plans in full on every call, and
// Citus copies the page's rows once more before they are sent (a
// partition scan of 1,000 entities). ok is false when it did not apply or
// found its placement or table id stale: the caller then goes through
// Citus.
func (s *Store) partitionOnNode(ctx context.Context, account, table, pk string, q EntityQuery, st pageStatement) (page *EntityPage, ok bool, err error) {
	rt := s.router.Load()
	if rt == nil {
		return nil, false, nil
	}
	n, sr, _ := rt.placeRange(distributionKey(account, tableKey(table), pk))
	if n == nil || sr.direct == nil {
		return nil, false, nil
	}
	return s.readNodes(ctx, rt, account, table, q, st, 0, []*node{n}, [][]*directRead{{sr.direct}})
}

// readNode runs a node's statement of a page. With encode, the node's
// first share rows are written as they arrive, beside the other nodes'
// (rowEntity): about what the merge keeps of each node's rows when the
// page's matches spread over the nodes, as partitions do; the rest stay
// rows, written only if the merge keeps them.
func readNode(ctx context.Context, n *node, sql string, args []any, encode func([]byte, *odata.Entity) []byte, share int) (a nodeAnswer) {
	rows, err := n.pool.Query(ctx, sql, args...)
	if err != nil {
		return nodeAnswer{err: err}
	}
	defer rows.Close()
	var (
		live int
		r    nodeRow
		raw  pgtype.DriverBytes
		enc  chunks
	)
	for rows.Next() {
		if rows.RawValues()[2] == nil { // no entity: the checks' row alone
			a.err = rows.Scan(&live, &a.here, nil, nil, nil, nil, nil)
		} else if a.err = rows.Scan(&live, &a.here, &r.pk, &r.rk, &r.ts, &r.xmin, &raw); a.err == nil {
			r.size = len(raw)
			if r.ready = encode != nil && len(a.rows) < share; r.ready {
				r.entity, r.props = rowEntity(r.pk, r.rk, r.ts, r.xmin, raw, encode, &enc), nil
			} else {
				r.props = enc.keep(raw)
			}
			a.rows = append(a.rows, r)
		}
		if a.err != nil {
			return a
		}
	}
	a.err = rows.Err()
	return a
}

// mergeNodes merges the nodes' rows, each node's in key order, into a
// page of top entities: each node sent its first top+1 matches, so the
// first top+1 of all are among them. bytes of properties are on the page
// already (see pageFill).
func mergeNodes(answers []nodeAnswer, pr pageRows, bytes int) *EntityPage {
	page := &EntityPage{Entities: make([]odata.Entity, 0, min(pr.top, 64))}
	fill := pageFill{page: page, rows: pr, bytes: bytes}
	next := make([]int, len(answers))
	for !page.More {
		best := -1
		for i, a := range answers {
			if next[i] == len(a.rows) {
				continue
			}
			if best < 0 || keyLess(&a.rows[next[i]], &answers[best].rows[next[best]]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		r := &answers[best].rows[next[best]]
		next[best]++
		if !r.ready {
			fill.add(r.pk, r.rk, r.ts, r.xmin, r.props)
		} else if fill.fits(r.pk, r.rk) {
			fill.put(r.entity, r.size)
		}
	}
	return page
}

// keyLess orders rows as the shards' "C" collation does: by bytes.
func keyLess(a, b *nodeRow) bool {
	return a.pk < b.pk || a.pk == b.pk && a.rk < b.rk
}
