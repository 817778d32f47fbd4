package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pgtables/pgtables/tableapi"
)

// backend is what a scenario runs against: the Table protocol endpoint,
// or the same operations as plain SQL (the ceiling).
type backend interface {
	name() string
	// prepare creates an empty table and, when preload is set, loads the
	// data set; it runs outside the timed window.
	prepare(ctx context.Context, data dataSet, preload bool) error
	cleanup(ctx context.Context) error
	// sibling returns a backend of the same kind on the same connections,
	// for a second data set in the same scenario.
	sibling() backend
	insert(ctx context.Context, w *worker) error
	upsert(ctx context.Context, w *worker) error
	pointRead(ctx context.Context, w *worker) error
	batchInsert(ctx context.Context, w *worker) error
	partitionScan(ctx context.Context, w *worker) error
	tableScan(ctx context.Context, w *worker) error
	filterScan(ctx context.Context, w *worker) error
	updateIfMatch(ctx context.Context, w *worker) error
	merge(ctx context.Context, w *worker) error
	insertDelete(ctx context.Context, w *worker) error
}

// worker is one concurrent client.
type worker struct {
	id, of int     // this worker's number and the number of workers
	run    string  // distinguishes the keys of one repetition from another's
	data   dataSet // the preloaded entities
	n      int     // operations done
	rng    *rand.Rand
}

// ownedKey returns a random preloaded entity that only this worker writes,
// so that conditional updates never race between workers.
func (w *worker) ownedKey() (i int, pk, rk string) {
	i = w.id + w.of*w.rng.IntN((w.data.total()-w.id+w.of-1)/w.of)
	pk, rk = w.data.key(i)
	return i, pk, rk
}

func (w *worker) newKey() (pk, rk string) {
	w.n++
	return fmt.Sprintf("w%03d", w.id), fmt.Sprintf("%s-%09d", w.run, w.n)
}

var tableSeq atomic.Int64

func tableName(prefix string) string {
	return fmt.Sprintf("%s%d%d", prefix, time.Now().UnixNano()%1_000_000_000, tableSeq.Add(1))
}

// httpBackend drives a Table endpoint.
type httpBackend struct {
	c     *tableapi.Client
	table string
	// used are the tables of finished scenarios, deleted at the end of the
	// run: deleting one at once would start the server purging its rows in
	// the background while the next scenarios are measured. Siblings share
	// the list.
	used *[]string
}

func newHTTPBackend(c *tableapi.Client) *httpBackend {
	return &httpBackend{c: c, used: new([]string)}
}

func (b *httpBackend) sibling() backend { return &httpBackend{c: b.c, used: b.used} }

func (b *httpBackend) name() string { return "pgtables" }

func (b *httpBackend) prepare(ctx context.Context, data dataSet, preload bool) error {
	b.table = tableName("bench")
	if err := b.c.CreateTable(ctx, b.table); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	if !preload {
		return nil
	}
	// Batches of 100 from a few goroutines keep the load short.
	total := data.total()
	errs := make(chan error, total/100)
	sem := make(chan struct{}, 8)
	for start := 0; start < total; start += 100 {
		sem <- struct{}{}
		go func(start int) {
			defer func() { <-sem }()
			bodies := make([][]byte, 0, 100)
			for i := start; i < start+100; i++ {
				pk, rk := data.key(i)
				bodies = append(bodies, entityJSON(pk, rk, i))
			}
			errs <- b.c.BatchInsert(ctx, b.table, bodies)
		}(start)
	}
	for i := 0; i < total/100; i++ {
		if err := <-errs; err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	return nil
}

func (b *httpBackend) cleanup(context.Context) error {
	*b.used = append(*b.used, b.table)
	return nil
}

// dropTables deletes the tables of the run.
func (b *httpBackend) dropTables(ctx context.Context) error {
	for _, t := range *b.used {
		if err := b.c.DeleteTable(ctx, t); err != nil {
			return err
		}
	}
	*b.used = nil
	return nil
}

var prefer = map[string]string{"Prefer": "return-no-content"}

func (b *httpBackend) insert(ctx context.Context, w *worker) error {
	pk, rk := w.newKey()
	_, err := b.c.Call(ctx, http.MethodPost, "/"+b.table, "", prefer, entityJSON(pk, rk, w.n), 204)
	return err
}

func (b *httpBackend) upsert(ctx context.Context, w *worker) error {
	i, pk, rk := w.ownedKey()
	_, err := b.c.Call(ctx, http.MethodPut, tableapi.EntityPath(b.table, pk, rk), "", nil, entityJSON(pk, rk, i), 204)
	return err
}

// merge merges an owned entity's properties (MERGE with If-Match *, as
// the SDKs' update_entity in merge mode sends it).
func (b *httpBackend) merge(ctx context.Context, w *worker) error {
	i, pk, rk := w.ownedKey()
	_, err := b.c.Call(ctx, "MERGE", tableapi.EntityPath(b.table, pk, rk), "", map[string]string{"If-Match": "*"}, entityJSON(pk, rk, i), 204)
	return err
}

// insertDelete inserts a new entity and deletes it: a delete needs an
// entity of its own, which a timed run would otherwise use up.
func (b *httpBackend) insertDelete(ctx context.Context, w *worker) error {
	pk, rk := w.newKey()
	if _, err := b.c.Call(ctx, http.MethodPost, "/"+b.table, "", prefer, entityJSON(pk, rk, w.n), 204); err != nil {
		return err
	}
	_, err := b.c.Call(ctx, http.MethodDelete, tableapi.EntityPath(b.table, pk, rk), "", map[string]string{"If-Match": "*"}, nil, 204)
	return err
}

func (b *httpBackend) pointRead(ctx context.Context, w *worker) error {
	pk, rk := w.data.key(w.rng.IntN(w.data.total()))
	r, err := b.c.Call(ctx, http.MethodGet, tableapi.EntityPath(b.table, pk, rk), "", nil, nil, 200)
	if err != nil {
		return err
	}
	if !bytes.Contains(r.Body, []byte(`"RowKey":"`+rk+`"`)) || r.Header.Get("ETag") == "" {
		return fmt.Errorf("point read of %s/%s: wrong entity or no ETag", pk, rk)
	}
	return nil
}

func (b *httpBackend) batchInsert(ctx context.Context, w *worker) error {
	w.n++
	pk := fmt.Sprintf("w%03d-%s-%09d", w.id, w.run, w.n)
	bodies := make([][]byte, batchSize)
	for j := range bodies {
		bodies[j] = entityJSON(pk, fmt.Sprintf("r%03d", j), j)
	}
	return b.c.BatchInsert(ctx, b.table, bodies)
}

func (b *httpBackend) partitionScan(ctx context.Context, w *worker) error {
	pk, _ := w.data.key(w.rng.IntN(w.data.partitions) * preloadRows)
	n, pages, err := b.c.Query(ctx, b.table, "PartitionKey eq '"+pk+"'", nil)
	if err == nil && n != preloadRows {
		err = fmt.Errorf("partition scan of %s returned %d entities, want %d; pages %v", pk, n, preloadRows, pages)
	}
	return err
}

func (b *httpBackend) tableScan(ctx context.Context, w *worker) error {
	n, pages, err := b.c.Query(ctx, b.table, "", nil)
	if err == nil && n != w.data.total() {
		err = fmt.Errorf("table scan returned %d entities in %d pages, want %d", n, len(pages), w.data.total())
	}
	return err
}

func (b *httpBackend) filterScan(ctx context.Context, w *worker) error {
	cat := w.rng.IntN(categories)
	n, pages, err := b.c.Query(ctx, b.table, "Cat eq "+strconv.Itoa(cat), nil)
	if err == nil && n != w.data.total()/categories {
		err = fmt.Errorf("filter scan for Cat %d returned %d entities, want %d; pages %v", cat, n, w.data.total()/categories, pages)
	}
	return err
}

func (b *httpBackend) updateIfMatch(ctx context.Context, w *worker) error {
	i, pk, rk := w.ownedKey()
	path := tableapi.EntityPath(b.table, pk, rk)
	r, err := b.c.Call(ctx, http.MethodGet, path, "", nil, nil, 200)
	if err != nil {
		return err
	}
	etag := r.Header.Get("ETag")
	if etag == "" {
		return errors.New("read without ETag")
	}
	_, err = b.c.Call(ctx, http.MethodPut, path, "", map[string]string{"If-Match": etag}, entityJSON(pk, rk, i), 204)
	return err
}

// scenario is one workload: its operation, whether it needs the
// preloaded data set, and how many entities one operation writes or reads
// (nil: one), for the entities/s figure.
type scenario struct {
	name     string
	preload  bool
	op       func(backend, context.Context, *worker) error
	entities func(dataSet) int
}

var scenarios = []scenario{
	{"insert", false, backend.insert, nil},
	{"upsert", true, backend.upsert, nil},
	{"point-read", true, backend.pointRead, nil},
	{"batch-insert", false, backend.batchInsert, func(dataSet) int { return batchSize }},
	{"partition-scan", true, backend.partitionScan, func(dataSet) int { return preloadRows }},
	{"table-scan", true, backend.tableScan, func(d dataSet) int { return d.total() }},
	{"filter-scan", true, backend.filterScan, func(d dataSet) int { return d.total() / categories }},
	{"update-if-match", true, backend.updateIfMatch, nil},
	{"merge", true, backend.merge, nil},
	{"insert-delete", false, backend.insertDelete, nil},
	{"mixed", true, func(b backend, ctx context.Context, w *worker) error {
		if w.rng.IntN(10) < 7 {
			return b.pointRead(ctx, w)
		}
		return b.upsert(ctx, w)
	}, nil},
}

// withoutScenario returns list without the scenario name, and whether
// it held it.
func withoutScenario(list, name string) (string, bool) {
	var rest []string
	found := false
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == name {
			found = true
		} else if strings.TrimSpace(s) != "" {
			rest = append(rest, s)
		}
	}
	return strings.Join(rest, ","), found
}

func findScenarios(list string) ([]scenario, error) {
	if list == "" || list == "all" {
		return scenarios, nil
	}
	var out []scenario
	for _, name := range strings.Split(list, ",") {
		found := false
		for _, s := range scenarios {
			if s.name == strings.TrimSpace(name) {
				out = append(out, s)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown scenario %q", name)
		}
	}
	return out, nil
}
