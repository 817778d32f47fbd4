package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/odata/filter"
)

// Entity queries are keyset scans of the primary key in (pk, rk) order:
// a continuation names the next key to return.
const (
	sqlQueryEntities = `
SELECT e.pk, e.rk, e.ts, e.xmin, e.props FROM entities e
WHERE e.table_id = ` + liveTable
	sqlFromKey   = ` AND (e.pk, e.rk) >= ($3, $4)`
	sqlFromPK    = ` AND e.pk >= $3`
	sqlOrderPage = ` ORDER BY e.pk, e.rk LIMIT `

	// pageBytes bounds the stored bytes of one page, so that a page of
	// large entities cannot hold the server's memory: a page may always end
	// early with a continuation.
	pageBytes = 8 << 20
)

// entitySchema is how filters see an entity row.
var entitySchema = filter.Schema{
	Strings:    map[string]string{"PartitionKey": "e.pk", "RowKey": "e.rk"},
	Timestamp:  "e.ts",
	Properties: "e.props",
}

// EntityQuery selects a page of entities of one table.
type EntityQuery struct {
	Filter *filter.Expr // nil: all entities
	Top    int          // page size, 0..1000; 0 returns no entities
	// Continuation: start at (FromPK, FromRK), or at FromPK when only it is
	// set.
	FromPK, FromRK       string
	HasFromPK, HasFromRK bool
	// Range limits the result to the keys of a shared access signature's
	// key range, whatever the filter and continuation ask for.
	Range KeyRange
	// Encode, when set, writes each entity of the page as its row arrives
	// (odata.Entity's Encoded), as AppendEntityObject of the Encoder of the
	// response does: the page is then written while the database still
	// sends it, and its stored properties are never copied.
	Encode func(dst []byte, e *odata.Entity) []byte

	count bool // count the rows the page's statement examines

	// indexes are the table's ready property indexes that the filter may
	// use, and tableID the table's id, which the statement names so that
	// the planner can prove the indexes' predicates (indexes.go).
	indexes []filter.Index
	tableID int64
}

// schema is how the query's filter sees an entity row.
func (q *EntityQuery) schema() filter.Schema {
	if len(q.indexes) == 0 {
		return entitySchema
	}
	s := entitySchema
	s.Indexes = q.indexes
	return s
}

// EntityPage is one page of a query.
type EntityPage struct {
	Entities []odata.Entity
	// More is set when the query continues at (NextPK, NextRK).
	More           bool
	NextPK, NextRK string
	// Examined is how many rows the database read for the page, when
	// Counted: for a filter that the key does not serve, on one node
	// (examined.go). It tells a page that scanned much to find little.
	Examined int64
	Counted  bool
	// stored is the size of the entities' stored properties (pageFill),
	// which Encoded entities no longer hold.
	stored int
}

// queryEntities returns one page of the entities of a table that match q,
// in PartitionKey, RowKey order.
//
// A query is one statement: a scan of the primary key, narrowed to index
// ranges by the filter's key conditions, returning matches only, bounded
// by $top. When the filter has conditions the index cannot serve (other
// properties, RowKey without its PartitionKey, ne), that statement may
// read many rows per match, so it gets part of the scan budget: if it runs
// out having found matches, the page ends after the last one; if it found
// none, the page goes on as a chunked scan that spends the rest of the
// budget and then ends, possibly empty, with a continuation. Either way no
// request holds the database for minutes, and every page makes progress.
func (s *Store) queryEntities(ctx context.Context, account, table string, q EntityQuery) (*EntityPage, error) {
	if v, ok := filter.Fold(q.Filter, entitySchema); q.Top == 0 || ok && !v {
		// No continuation either: a pager that repeats $top=0 would
		// follow it forever.
		page := &EntityPage{}
		return page, s.emptyPageTable(ctx, page, account, table)
	}
	ranges, exact := filter.KeyRanges(q.Filter, "PartitionKey", "RowKey")
	cached := false
	if q.Filter != nil && !exact && comparesProperties(q.Filter) {
		var err error
		if q.tableID, q.indexes, cached, err = s.cachedIndexes(ctx, account, table); err != nil {
			return nil, err
		}
	}
	if q.Filter == nil || exact {
		page, err := s.pageOf(ctx, account, table, q)
		if err != nil {
			return nil, err
		}
		return page, s.emptyPageTable(ctx, page, account, table)
	}
	deadline := s.now().Add(s.opts.ScanBudget)
	q.count = true
	first, cancel := context.WithTimeout(ctx, s.opts.ScanFirst)
	pageOf := s.pageOf
	if s.acrossPartitions(q) {
		pageOf = s.acrossPage
	}
	page, err := pageOf(first, account, table, q)
	cancel()
	switch {
	case err == nil && cached && len(page.Entities) == 0 && !page.More:
		// Empty, perhaps because the cached table id is that of a table
		// deleted since: the catalog tells, and that the table exists
		// (which emptyPageTable would read otherwise).
		id, ixs, err := s.freshIndexes(ctx, account, table)
		if err != nil || id == q.tableID {
			return page, err
		}
		q.tableID, q.indexes = id, ixs
		return s.queryEntities(ctx, account, table, q)
	case err == nil:
		return page, s.emptyPageTable(ctx, page, account, table)
	case first.Err() == nil || ctx.Err() != nil:
		return nil, err
	case len(page.Entities) > 0:
		// Out of time after some matches: the next page starts right after
		// the last one. No key can hold U+0001, so the key with it appended
		// is the least key after the last match's.
		last := page.Entities[len(page.Entities)-1]
		page.More, page.NextPK, page.NextRK = true, last.PartitionKey, last.RowKey+"\x01"
		return page, nil
	}
	return s.scanEntities(ctx, account, table, q, ranges, deadline)
}

// queryEntitiesSQL builds the one statement of a query page.
func queryEntitiesSQL(distributed bool, account, table string, q EntityQuery) (string, []any, error) {
	st := q.statement()
	if pk, ok := filter.Partition(q.Filter, "PartitionKey"); ok && distributed {
		st.pin, st.hasPin = pk, true
	}
	// Through Citus the coordinator plans the statement: not there.
	st.generic = !distributed && genericIndexPlan(q)
	return pageSQL(account, table, q, st)
}

// pageStatement is where one statement of a page starts and ends, and what
// it selects; the filter and key range of the query apply to every one.
type pageStatement struct {
	keysOnly bool
	// Continuation: from (fromPK, fromRK), or from fromPK when only it is
	// set; or after every key of afterPK.
	fromPK, fromRK       string
	hasFromPK, hasFromRK bool
	afterPK              string
	hasAfterPK           bool
	// toPK, toRK: the last key, inclusive.
	toPK, toRK string
	hasTo      bool
	// pin names the one partition the statement can touch, so that Citus
	// runs it on that partition's shard alone rather than on every shard.
	// On PostgreSQL it would only be one more condition for the planner to
	// misjudge.
	pin    string
	hasPin bool
	limit  int // rows returned at most
	// generic plans the statement once for all values when its index
	// conditions allow (genericIndexPlan).
	generic bool
}

// rows is how a page of q takes its statements' rows: up to $top.
func (q *EntityQuery) rows() pageRows { return pageRows{top: q.Top, encode: q.Encode} }

// statement is the one statement of a page on a single node: from the
// continuation, one row past $top to know where the next page starts.
func (q *EntityQuery) statement() pageStatement {
	return pageStatement{fromPK: q.FromPK, fromRK: q.FromRK, hasFromPK: q.HasFromPK, hasFromRK: q.HasFromRK, limit: q.Top + 1}
}

// Bounds of page statements other than a continuation, and what a
// statement that only finds a page's keys selects.
const (
	sqlQueryKeys = `
SELECT e.pk, e.rk FROM entities e
WHERE e.table_id = ` + liveTable
	sqlAfterPK  = ` AND e.pk > $%d`
	sqlToKey    = ` AND (e.pk, e.rk) <= ($%d, $%d)`
	sqlPinnedPK = ` AND e.pk = $%d AND e.dkey = $%d`
)

// pageSQL builds one statement of a query page.
func pageSQL(account, table string, q EntityQuery, st pageStatement) (string, []any, error) {
	sql := sqlQueryEntities
	if st.keysOnly {
		sql = sqlQueryKeys
	}
	args := []any{account, tableKey(table)}
	switch {
	case st.hasFromPK && st.hasFromRK:
		sql += sqlFromKey
		args = append(args, st.fromPK, st.fromRK)
	case st.hasFromPK:
		sql += sqlFromPK
		args = append(args, st.fromPK)
	case st.hasAfterPK:
		sql += fmt.Sprintf(sqlAfterPK, len(args)+1)
		args = append(args, st.afterPK)
	}
	if st.hasTo {
		sql += fmt.Sprintf(sqlToKey, len(args)+1, len(args)+2)
		args = append(args, st.toPK, st.toRK)
	}
	sql, args = q.Range.appendSQL(sql, args)
	if st.hasPin {
		sql += fmt.Sprintf(sqlPinnedPK, len(args)+1, len(args)+2)
		// A filter's literal may hold U+0000, which text takes only as stored.
		args = append(args, odata.StoredString(st.pin), distributionKey(account, tableKey(table), st.pin))
	}
	if q.Filter != nil {
		schema := q.schema()
		schema.IndexLiterals = st.generic
		cond, fargs, err := filter.Compile(q.Filter, schema, len(args)+1)
		if err != nil {
			return "", nil, err
		}
		sql += " AND (" + cond + ")"
		args = append(args, fargs...)
	}
	switch {
	case st.generic:
		sql += sqlIndexedTableID + strconv.FormatInt(q.tableID, 10)
	case len(q.indexes) > 0:
		sql += fmt.Sprintf(sqlIndexedTable, len(args)+1)
		args = customPlan(append(args, q.tableID))
	}
	return sql + sqlOrderPage + strconv.Itoa(st.limit), args, nil
}

// appendPartition names the partition's distribution key when entities
// are distributed and the filter pins one partition, as pageStatement.pin
// does for the statements of a page.
func (q *EntityQuery) appendPartition(distributed bool, account, table string, sql string, args []any) (string, []any) {
	pk, ok := filter.Partition(q.Filter, "PartitionKey")
	if !distributed || !ok {
		return sql, args
	}
	args = append(args, distributionKey(account, tableKey(table), pk))
	return sql + " AND e.dkey = $" + strconv.Itoa(len(args)), args
}

// runPage runs a page's statement and collects up to rows.top entities
// and the key of the one after them. When the statement fails midway, the
// page holds what arrived before, in order, along with the error.
func (s *Store) runPage(ctx context.Context, rows pageRows, sql string, args []any) (*EntityPage, error) {
	return runPageOn(ctx, s.pool, rows, sql, args)
}

// runPageOn is runPage on a given connection, transaction or pool (a
// partition's node: route.go).
func runPageOn(ctx context.Context, db querier, pr pageRows, sql string, args []any) (*EntityPage, error) {
	rows, err := db.Query(ctx, sql, args...)
	return collectPage(rows, err, pr)
}

// collectPage reads a page statement's rows, as runPageOn describes;
// err is the error of sending the statement. Rows with a NULL key are the
// counts of rows examined of a counted statement (examined.go), before
// and after the page's rows.
func collectPage(rows pgx.Rows, err error, pr pageRows) (*EntityPage, error) {
	page := &EntityPage{Entities: make([]odata.Entity, 0, min(pr.top, 64))}
	if err != nil {
		return page, classify(fmt.Errorf("query entities: %w", err))
	}
	defer rows.Close()
	var (
		ts            int64
		xmin          uint32
		props         propsArena
		driver        pgtype.DriverBytes
		row           []byte // a row's keys and ETag, made one string
		counts        int
		countedBefore int64
	)
	fill := pageFill{page: page, rows: pr}
	// One slice of destinations for every row: Scan's arguments escape.
	// Encoded as it arrives, a row's properties are read where the driver
	// holds them, until the next row; else they are copied into props.
	dest := []any{nil, nil, &ts, &xmin, &props}
	if pr.encode != nil {
		dest[4] = &driver
	}
	for rows.Next() {
		// The keys are text, the same bytes in either format: they are
		// read from the row as they are, without a string each.
		raw := rows.RawValues()
		if raw[0] == nil {
			if err := rows.Scan(nil, nil, &ts, nil, nil); err != nil {
				return page, classify(fmt.Errorf("count examined rows: %w", err))
			}
			if counts++; counts == 1 {
				countedBefore = ts
			} else {
				page.Examined, page.Counted = ts-countedBefore, true
			}
			continue
		}
		if page.More {
			continue // up to the count after the page, if any
		}
		pk, rk := raw[0], raw[1]
		if fill.full() {
			page.More, page.NextPK, page.NextRK = true, string(pk), string(rk)
			continue
		}
		if err := rows.Scan(dest...); err != nil {
			return page, classify(fmt.Errorf("query entities: %w", err))
		}
		stored := props.last
		if pr.encode != nil {
			stored = driver
		}
		row = appendETag(append(append(row[:0], pk...), rk...), ts, xmin, keyHash(pk, rk))
		s := string(row)
		e := odata.Entity{PartitionKey: s[:len(pk)], RowKey: s[len(pk) : len(pk)+len(rk)], Timestamp: ts, ETag: s[len(pk)+len(rk):], Stored: stored}
		fill.put(encoded(e, pr.encode, &fill.enc), len(stored))
	}
	if err := rows.Err(); err != nil {
		return page, classify(fmt.Errorf("query entities: %w", err))
	}
	return page, nil
}

// propsArena receives the properties of a page's rows from pgx (as a
// pgtype.BytesScanner) and keeps them in chunks that the rows share: an
// allocation per row, as scanning into a []byte makes, costs more than
// encoding the row's JSON. last is the latest row's, nil for NULL, and
// cannot be appended to in place.
type propsArena struct {
	chunks
	last []byte
}

// ScanBytes implements pgtype.BytesScanner.
func (a *propsArena) ScanBytes(v []byte) error {
	a.last = nil
	if v != nil {
		a.last = a.keep(v)
	}
	return nil
}

// chunks holds the byte strings of a page (its rows' properties, or its
// entities as written) in chunks that are never moved, so that each piece
// stays a piece of one, with its own capacity: appending to it cannot
// reach the next. The first chunk is small, for the pages of one entity;
// each is twice the one before, up to chunkMax.
type chunks struct{ buf []byte }

const (
	chunkMax = 64 << 10
	// encodedRoom is the room an entity about to be written asks for: its
	// size is known only once written. One that outgrows what is left
	// grows its chunk into a copy, once, which leaves the pieces before it
	// where they are.
	encodedRoom = 4 << 10
)

// room makes room for n more bytes in the current chunk.
func (c *chunks) room(n int) {
	if c.buf == nil || n > cap(c.buf)-len(c.buf) {
		c.buf = make([]byte, 0, max(n, min(2*cap(c.buf), chunkMax), 512))
	}
}

// since is the piece from start to the end of the current chunk.
func (c *chunks) since(start int) []byte { return c.buf[start:len(c.buf):len(c.buf)] }

// keep copies v into the chunks and returns the copy.
func (c *chunks) keep(v []byte) []byte {
	c.room(len(v))
	start := len(c.buf)
	c.buf = append(c.buf, v...)
	return c.since(start)
}

// write writes e with encode into the chunks and returns its bytes.
func (c *chunks) write(encode func([]byte, *odata.Entity) []byte, e *odata.Entity) []byte {
	c.room(encodedRoom)
	start := len(c.buf)
	c.buf = encode(c.buf, e)
	return c.since(start)
}

// pageRows is how a page takes rows in key order: up to top entities, each
// written by encode as it is added when that is set (EntityQuery.Encode).
type pageRows struct {
	top    int
	encode func(dst []byte, e *odata.Entity) []byte
}

// pageFill adds rows in key order to a page of up to rows.top entities,
// ending it early past pageBytes of properties, and notes the key of the
// first row that did not fit as where the next page starts.
type pageFill struct {
	page  *EntityPage
	rows  pageRows
	bytes int
	enc   chunks
}

// add adds one row to the page, or notes where the next page starts. The
// page keeps props, which must be the row's own, unless rows.encode
// writes them: then only their encoding stays.
func (f *pageFill) add(pk, rk string, ts int64, xmin uint32, props []byte) {
	if f.fits(pk, rk) {
		f.put(rowEntity(pk, rk, ts, xmin, props, f.rows.encode, &f.enc), len(props))
	}
}

// fits reports whether the row with key (pk, rk) goes on the page; when it
// is the first that does not, it notes it as where the next page starts.
func (f *pageFill) fits(pk, rk string) bool {
	switch {
	case f.page.More:
		return false
	case f.full():
		f.page.More, f.page.NextPK, f.page.NextRK = true, pk, rk
		return false
	}
	return true
}

// full reports whether the page is complete: the next row starts the next
// page.
func (f *pageFill) full() bool {
	n := len(f.page.Entities)
	return n == f.rows.top || (f.bytes > pageBytes && n > 0)
}

// put adds e, which fits, with size bytes of stored properties. A full
// slice grows fourfold, up to top: a page of 1,000 is copied twice on its
// way, not five times as append would.
func (f *pageFill) put(e odata.Entity, size int) {
	f.bytes += size
	p := f.page
	p.stored += size
	if n := len(p.Entities); n == cap(p.Entities) && f.rows.top > n {
		p.Entities = slices.Grow(p.Entities, min(f.rows.top, 4*max(n, 16))-n)
	}
	p.Entities = append(p.Entities, e)
}

// rowEntity is the entity of a row, written by encode into enc's chunks
// when that is set.
func rowEntity(pk, rk string, ts int64, xmin uint32, props []byte, encode func([]byte, *odata.Entity) []byte, enc *chunks) odata.Entity {
	return encoded(odata.Entity{PartitionKey: pk, RowKey: rk, Timestamp: ts, ETag: formatETag(ts, xmin, pk, rk), Stored: props}, encode, enc)
}

// encoded is e, written by encode into enc's chunks in place of its
// stored properties when encode is set.
func encoded(e odata.Entity, encode func([]byte, *odata.Entity) []byte, enc *chunks) odata.Entity {
	if encode != nil {
		e.Encoded, e.Stored = enc.write(encode, &e), nil
	}
	return e
}

// emptyPageTable tells an empty page from a missing table.
func (s *Store) emptyPageTable(ctx context.Context, page *EntityPage, account, table string) error {
	if len(page.Entities) > 0 || page.More {
		return nil
	}
	ok, err := s.tableExists(ctx, s.pool, account, table)
	if err != nil {
		return err
	}
	if !ok {
		return ErrTableNotFound
	}
	return nil
}

// Scans read the rows of one table in key order, chunk by chunk, and mark
// the matches; props travel only for matches.
const (
	sqlScanEntities = `
SELECT e.pk, e.rk, e.ts, e.xmin, CASE WHEN (%s) THEN e.props END FROM entities e
WHERE e.table_id = $1`
	sqlScanFromKey = ` AND (e.pk, e.rk) >= ($2, $3)`
	sqlScanFromPK  = ` AND e.pk >= $2`
)

// scanEntities runs a page of a filtered query as a bounded scan. ranges,
// when not nil, is the part of the filter that the primary key serves as
// index ranges (filter.KeyRanges); it narrows each chunk to the ranges that
// can hold matches, and nothing else may, or a chunk would no longer bound
// the rows read.
func (s *Store) scanEntities(ctx context.Context, account, table string, q EntityQuery, ranges *filter.Expr, deadline time.Time) (*EntityPage, error) {
	// All chunks of a page read one snapshot, so that a page never shows
	// part of a batch that committed between two chunks.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, classify(fmt.Errorf("query entities: %w", err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to keep
	var tableID int64
	if err := tx.QueryRow(ctx, sqlLiveTableID, account, tableKey(table)).Scan(&tableID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrTableNotFound
		}
		return nil, classify(fmt.Errorf("query entities: %w", err))
	}
	page := &EntityPage{Entities: make([]odata.Entity, 0, min(q.Top, 64))}
	fromPK, fromRK, hasPK, hasRK := q.FromPK, q.FromRK, q.HasFromPK, q.HasFromRK
	size := 0
	var enc chunks
	for {
		args := []any{tableID}
		where := ""
		switch {
		case hasPK && hasRK:
			where = sqlScanFromKey
			args = append(args, fromPK, fromRK)
		case hasPK:
			where = sqlScanFromPK
			args = append(args, fromPK)
		}
		where, args = q.Range.appendSQL(where, args)
		where, args = q.appendPartition(s.distributed.Load(), account, table, where, args)
		if ranges != nil {
			cond, kargs, err := filter.Compile(ranges, entitySchema, len(args)+1)
			if err != nil {
				return nil, err
			}
			where += " AND (" + cond + ")"
			args = append(args, kargs...)
		}
		match, margs, err := filter.Compile(q.Filter, entitySchema, len(args)+1)
		if err != nil {
			return nil, err
		}
		args = append(args, margs...)
		sql := fmt.Sprintf(sqlScanEntities, match) + where + sqlOrderPage + strconv.Itoa(s.opts.ScanChunk+1)

		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return nil, classify(fmt.Errorf("query entities: %w", err))
		}
		var (
			pk, rk  string
			ts      int64
			xmin    uint32
			props   pgtype.DriverBytes
			scanned int
			full    bool
		)
		_, err = pgx.ForEachRow(rows, []any{&pk, &rk, &ts, &xmin, &props}, func() error {
			scanned++
			if scanned > s.opts.ScanChunk {
				// One row past the chunk: where the next chunk starts.
				fromPK, fromRK, hasPK, hasRK = pk, rk, true, true
				return nil
			}
			if props == nil {
				return nil
			}
			if len(page.Entities) == q.Top || (size > pageBytes && len(page.Entities) > 0) {
				page.More, page.NextPK, page.NextRK = true, pk, rk
				full = true
				return errPageFull
			}
			size += len(props)
			stored := []byte(props)
			if q.Encode == nil {
				stored = enc.keep(stored) // the driver's until the next row
			}
			page.Entities = append(page.Entities, rowEntity(pk, rk, ts, xmin, stored, q.Encode, &enc))
			return nil
		})
		if err != nil && !errors.Is(err, errPageFull) {
			return nil, classify(fmt.Errorf("query entities: %w", err))
		}
		page.Examined += int64(scanned)
		page.Counted = true
		switch {
		case full:
			return page, nil
		case scanned <= s.opts.ScanChunk:
			return page, nil // the table holds no more rows in range
		case !s.now().Before(deadline):
			page.More, page.NextPK, page.NextRK = true, fromPK, fromRK
			return page, nil
		}
	}
}
