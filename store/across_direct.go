package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgtables/pgtables/odata"
)

// A page of an indexed filter across partitions on Citus reads the shards'
// placements on their nodes, as point reads do (citus_reads.go), rather
// than through the coordinator: one statement per node, for all of the
// node's shards, the nodes at once, and pgtables merges their ordered
// answers. Through the coordinator the same page took a transaction of
// four round trips, the coordinator's planning and its copy of every row,
// and the shard statements one after the other on each node (the
// coordinator keeps one connection per node): about 12 ms of the
// coordinator's CPU and most of the page's time, for a page of 1,000
// entities that the shards' indexes find in a few milliseconds.
//
// Each node's statement checks, in its own snapshot, that the table id
// (the cached one, which the indexes' predicates name) is live, on the
// node's placement of tables, and that every shard it reads is still the
// node's in Citus's metadata. When a shard has moved, the page goes
// through the coordinator (as a point read does, until the placements are
// loaded again); when the table is gone, the page is empty, which the
// caller checks against the catalog (queryEntities). Each node reads one
// snapshot; through the coordinator each shard statement reads its own,
// so a page is no less consistent than it was.
//
// The rows of a node are the page's statement on each of its shards,
// merged by PostgreSQL, and one row with a NULL key carrying the two
// checks: read whatever its place among them.
const (
	sqlDirectChecks = `
(SELECT NULL::text COLLATE "C", NULL::text COLLATE "C", NULL::bigint, NULL::xid, NULL::text,
  EXISTS (SELECT 1 FROM %s WHERE id = $1 AND deleted_at IS NULL),
  (SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_local_group l ON l.groupid = p.groupid
    WHERE p.shardid IN (%s) AND p.shardstate = 1) = %d)
UNION ALL
(SELECT u.pk, u.rk, u.ts, u.xmin, u.props, NULL, NULL FROM (`
	// One shard's part: sqlAcrossPage on the shard's placement.
	sqlDirectShard = `
(SELECT e.pk, e.rk, e.ts, e.xmin, e.props::text FROM %s e
WHERE e.table_id = $1`
	sqlDirectMerge = `
) u(pk, rk, ts, xmin, props)` + sqlDirectOrder
	sqlDirectOrder = ` ORDER BY u.pk, u.rk LIMIT `
)

// directNode is one node's share of a direct page: its shards.
type directNode struct {
	node   *node
	shards []*directRead
}

// directAcrossPage runs a page across partitions of an indexed filter on
// the shards' nodes (see above). ok is false when it cannot: no routing,
// a shard without a direct placement, a node down or refusing
// connections, a shard moved; the caller then runs the page through the
// coordinator.
func (s *Store) directAcrossPage(ctx context.Context, q EntityQuery) (page *EntityPage, err error, ok bool) {
	rt := s.router.Load()
	if rt == nil {
		return nil, nil, false
	}
	nodes, ok := rt.directNodes()
	if !ok {
		return nil, nil, false
	}
	where, args, err := acrossWhere(q.tableID, q)
	if err != nil {
		return &EntityPage{}, err, true
	}
	args = customPlan(args)
	type answer struct {
		rows      []directRow
		live, all bool
		err       error
	}
	answers := make([]answer, len(nodes))
	done := make(chan struct{}, len(nodes))
	for i, dn := range nodes {
		go func() {
			defer func() { done <- struct{}{} }()
			a := &answers[i]
			a.rows, a.live, a.all, a.err = readDirect(ctx, dn, directSQL(dn, where, q.Top+1), args)
		}()
	}
	for range nodes {
		<-done
	}
	var lists [][]directRow
	for i, a := range answers {
		switch {
		case a.err != nil:
			if rt.failed(nodes[i].node, a.err) || shardGone(a.err) {
				// Not reached, or the shard's table is gone from the
				// node: through the coordinator, which knows.
				rt.refresh()
				return nil, nil, false
			}
			return &EntityPage{}, classify(fmt.Errorf("query entities: %w", a.err)), true
		case !a.all:
			rt.refresh()
			return nil, nil, false
		case !a.live:
			return &EntityPage{}, nil, true
		}
		lists = append(lists, a.rows)
	}
	if h := rt.acrossHook; h != nil {
		h()
	}
	return mergeDirect(lists, q.Top), nil, true
}

// directNodes groups the loaded placements of entities by node, or reports
// false when some shard has no placement that a node can read directly.
func (r *router) directNodes() ([]directNode, bool) {
	p := r.cur.Load()
	if p == nil || len(p.ranges) == 0 {
		return nil, false
	}
	if time.Since(p.loaded) > routeRefresh {
		r.refresh() // in the background, as placeRange does
	}
	var nodes []directNode
	for _, sr := range p.ranges {
		if sr.node == nil || sr.direct == nil || sr.node.downUntil.Load() > time.Now().UnixNano() {
			return nil, false
		}
		k := 0
		for k < len(nodes) && nodes[k].node != sr.node {
			k++
		}
		if k == len(nodes) {
			nodes = append(nodes, directNode{node: sr.node})
		}
		nodes[k].shards = append(nodes[k].shards, sr.direct)
	}
	return nodes, true
}

// directSQL is dn's statement of a page: where (acrossWhere's) on each of
// its shards, limit rows at most in all.
func directSQL(dn directNode, where string, limit int) string {
	var b strings.Builder
	ids := make([]string, len(dn.shards))
	for i, d := range dn.shards {
		ids[i] = strconv.FormatInt(d.id, 10)
	}
	fmt.Fprintf(&b, sqlDirectChecks, dn.shards[0].tables, strings.Join(ids, ", "), len(dn.shards))
	for i, d := range dn.shards {
		if i > 0 {
			b.WriteString("\nUNION ALL")
		}
		fmt.Fprintf(&b, sqlDirectShard, d.shard)
		b.WriteString(where)
		b.WriteString(")")
	}
	b.WriteString(sqlDirectMerge)
	b.WriteString(strconv.Itoa(limit))
	b.WriteString(")")
	return b.String()
}

// directRow is one entity row of a node's answer.
type directRow struct {
	pk, rk string
	ts     int64
	xmin   uint32
	props  []byte
}

// readDirect runs a node's statement: its entity rows, in order, and the
// checks' outcomes (live: the table; all: the node still holds every
// shard read).
func readDirect(ctx context.Context, dn directNode, sql string, args []any) (out []directRow, live, all bool, err error) {
	rows, err := dn.node.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, false, err
	}
	defer rows.Close()
	checked := false
	var r directRow
	for rows.Next() {
		if rows.RawValues()[0] == nil {
			if err := rows.Scan(nil, nil, nil, nil, nil, &live, &all); err != nil {
				return nil, false, false, err
			}
			checked = true
			continue
		}
		if err := rows.Scan(&r.pk, &r.rk, &r.ts, &r.xmin, &r.props, nil, nil); err != nil {
			return nil, false, false, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, false, err
	}
	if !checked {
		return nil, false, false, errors.New("query entities: no checks in a node's answer")
	}
	return out, live, all, nil
}

// mergeDirect merges the nodes' ordered rows into a page of up to top
// entities, as collectPage makes one of a statement's rows. Keys compare
// as bytes, as COLLATE "C" orders them.
func mergeDirect(lists [][]directRow, top int) *EntityPage {
	page := &EntityPage{Entities: make([]odata.Entity, 0, min(top, 64))}
	bytes := 0
	for {
		k := -1
		for i, l := range lists {
			if len(l) == 0 {
				continue
			}
			if k < 0 || keyLess(l[0], lists[k][0]) {
				k = i
			}
		}
		if k < 0 {
			return page
		}
		r := lists[k][0]
		lists[k] = lists[k][1:]
		if len(page.Entities) == top || (bytes > pageBytes && len(page.Entities) > 0) {
			page.More, page.NextPK, page.NextRK = true, r.pk, r.rk
			return page
		}
		bytes += len(r.props)
		page.Entities = append(page.Entities, odata.Entity{PartitionKey: r.pk, RowKey: r.rk, Timestamp: r.ts, ETag: formatETag(r.ts, r.xmin, r.pk, r.rk), Stored: r.props})
	}
}

func keyLess(a, b directRow) bool {
	if a.pk != b.pk {
		return a.pk < b.pk
	}
	return a.rk < b.rk
}
