package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/tableapi"
)

// The property-index scenario measures what a declared property index
// buys and costs. It loads one table (-index-entities over
// -index-partitions partitions, through entity group transactions of the
// protocol, so the load is what any client could do), then, with 0, 1, 2
// and 3 indexes declared through the index API in turn:
//
//   - a query whose filter matches 0.1% of the table by an Int32 (Age eq 42)
//     and one by a DateTime range, each run to its end, per page;
//   - insert and upsert, with the server side's CPU per operation.
//
// The first index is on Age, the second on Seen (the DateTime), the third
// on Name (a String no query uses: only its cost on writes counts).
const scenarioPropertyIndex = "property-index"

// ageMatch is the Age of one entity in every 1000: the selective filter.
const ageMatch = 42

// indexPlan is the order in which the scenario declares indexes.
var indexPlan = []struct{ property, edmType string }{
	{"Age", "Int32"},
	{"Seen", "DateTime"},
	{"Name", "String"},
}

// indexSet is the loaded table of the scenario: entities numbered
// 0..total-1, spread evenly over partitions.
type indexSet struct{ total, partitions int }

func (s indexSet) perPartition() int { return s.total / s.partitions }

func (s indexSet) key(i int) (pk, rk string) {
	return fmt.Sprintf("ip%05d", i/s.perPartition()), fmt.Sprintf("r%07d", i%s.perPartition())
}

// age is entity i's Age: ageMatch for i%1000 == 42, else 18..99 without it.
func (s indexSet) age(i int) int {
	if i%1000 == ageMatch {
		return ageMatch
	}
	a := 18 + i%82
	if a == ageMatch {
		a++
	}
	return a
}

// seen is entity i's Seen in seconds after epoch: a permutation of
// 0..total-1 (7919 is prime and does not divide a total that is a
// multiple of 1000), so that a range of them holds entities of every
// part of the key space, as a time of last visit would.
func (s indexSet) seen(i int) int64 { return int64(i) * 7919 % int64(s.total) }

// seenRange is the DateTime filter matching a thousandth of the entities
// (seconds [total/2, total/2 + total/1000) after epoch), and its count.
func (s indexSet) seenRange() (string, int) {
	lo := epoch.Add(time.Duration(s.total/2) * time.Second)
	hi := lo.Add(time.Duration(s.total/1000) * time.Second)
	f := "Seen ge datetime'" + lo.Format(time.RFC3339Nano) + "' and Seen lt datetime'" + hi.Format(time.RFC3339Nano) + "'"
	return f, s.total / 1000
}

// entity is the body of entity i with keys pk, rk, and its other
// properties those of props (entityProps). An entity written by the insert
// phase (i < 0) has an Age and a Seen that no query matches.
func (s indexSet) entity(pk, rk string, i, props int) []byte {
	age, seen := 17, int64(-86400)
	if i >= 0 {
		age, seen = s.age(i), s.seen(i)
	}
	b := make([]byte, 0, 720)
	b = append(b, `{"PartitionKey":`...)
	b = strconv.AppendQuote(b, pk)
	b = append(b, `,"RowKey":`...)
	b = strconv.AppendQuote(b, rk)
	b = append(b, `,"Age":`...)
	b = strconv.AppendInt(b, int64(age), 10)
	b = append(b, `,"Seen@odata.type":"Edm.DateTime","Seen":"`...)
	b = append(b, odata.FormatDateTime(odata.Ticks(epoch)+seen*10_000_000)...)
	b = append(b, '"')
	return appendPropsJSON(b, max(props, 0))
}

// upsertProps is the props of an upsert of a loaded entity: never those
// it was loaded with (props i < total), so that the upsert changes the
// stored properties, as a real one does. An upsert that writes the same
// bytes again is a HOT update whatever the indexes, and would hide what
// indexes cost an update. Its Age and Seen stay: the queries' matches do
// not move.
func (s indexSet) upsertProps(r int) int { return s.total + r }

// indexResult is one measurement of the scenario with some indexes.
type indexResult struct {
	Indexes []string `json:"indexes"` // property of each declared index
	// Queries: per filter, the median time of the whole query and of one
	// of its pages, and the pages of that query.
	Queries []queryTiming `json:"queries"`
	// Writes: per write kind, operations and the server side's CPU per op.
	Writes []writeCost `json:"writes"`
}

type queryTiming struct {
	Name    string    `json:"name"`
	Filter  string    `json:"filter"`
	Matches int       `json:"matches"`
	Pages   int       `json:"pages"`
	QueryMs float64   `json:"query_ms"` // median of the runs
	PageMs  float64   `json:"page_ms"`  // QueryMs / Pages
	RunsMs  []float64 `json:"runs_ms"`
	// CPUPerPage is the server side's CPU over all runs (retries too),
	// per page of the runs, in microseconds; by process group and total.
	CPUPerPage map[string]float64 `json:"cpu_us_per_page,omitempty"`
	// Retries are the runs answered 503 and run again.
	Retries    int    `json:"retries,omitempty"`
	FirstRetry string `json:"first_retry,omitempty"`
}

type writeCost struct {
	Name      string             `json:"name"`
	Ops       int64              `json:"ops"`
	OpsPerSec float64            `json:"ops_per_sec"`
	CPUPerOp  map[string]float64 `json:"cpu_us_per_op,omitempty"`
	// Rounds measured; the figures above are those of the round of median
	// total CPU per op, RoundsCPU every round's total, Errors those of all.
	Rounds    int       `json:"rounds,omitempty"`
	RoundsCPU []float64 `json:"rounds_cpu_us_per_op,omitempty"`
	Errors    int64     `json:"errors"`
	FirstErr  string    `json:"first_error,omitempty"`
}

// writeConfigs are the numbers of indexes (of indexPlan, in order) whose
// writes the scenario measures.
var writeConfigs = []int{0, 1, 3}

// runPropertyIndex runs the scenario on the endpoint of c: the queries
// with 0..3 indexes, declared in turn, then the writes in rounds that
// alternate the numbers of indexes (0, 1, 3, then 3, 1, 0, ...), so that
// a change of the machine's load during the run reaches every number
// alike; each write's CPU per op is the median of its rounds.
func runPropertyIndex(ctx context.Context, cfg *config, c *tableapi.Client, watch *cpuWatch, stderr io.Writer) (res []indexResult, err error) {
	set := indexSet{total: cfg.indexEntities, partitions: cfg.indexPartitions}
	table, kept := tableName("pgtix"), cfg.indexTable != ""
	if kept {
		table = cfg.indexTable
	}
	fresh, err := ensureIndexTable(ctx, c, table, kept)
	if err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		derr := setIndexes(dctx, c, table, 0)
		if !kept && derr == nil {
			derr = c.DeleteTable(dctx, table)
		}
		if derr != nil && err == nil {
			err = fmt.Errorf("clean up %s: %w", table, derr)
		}
	}()
	if fresh {
		t0 := time.Now()
		if err := loadIndexSet(ctx, c, table, set); err != nil {
			return nil, err
		}
		if cfg.progress > 0 {
			fmt.Fprintf(stderr, "%s: loaded %d entities in %s\n", scenarioPropertyIndex, set.total, time.Since(t0).Round(time.Millisecond))
		}
	}
	seenFilter, seenCount := set.seenRange()
	queries := []struct {
		name, filter string
		want         int
	}{
		{"Age eq 42 (Int32)", "Age eq " + strconv.Itoa(ageMatch), set.total / 1000},
		{"Seen range (DateTime)", seenFilter, seenCount},
	}
	for step := 0; step <= len(indexPlan); step++ {
		if err := setIndexesTimed(ctx, cfg, c, table, step, stderr); err != nil {
			return res, err
		}
		r := indexResult{Indexes: planNames(step)}
		for _, q := range queries {
			qt, err := timeQuery(ctx, c, table, q.filter, q.want, cfg.indexQueries, watch)
			if err != nil {
				return res, fmt.Errorf("%s with indexes %v: %w", q.name, r.Indexes, err)
			}
			qt.Name = q.name
			r.Queries = append(r.Queries, qt)
		}
		res = append(res, r)
	}
	// Keys of inserts differ between runs, for a kept table.
	runID := strconv.FormatInt(time.Now().Unix()%1_000_000, 36)
	rounds := make([][]writeCost, len(res))
	for round := 0; round < cfg.indexWriteRounds; round++ {
		order := slices.Clone(writeConfigs)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			if err := setIndexesTimed(ctx, cfg, c, table, n, stderr); err != nil {
				return res, err
			}
			for _, wk := range []string{"insert", "upsert"} {
				rounds[n] = append(rounds[n], indexWrites(ctx, cfg, c, table, set, wk, fmt.Sprintf("%s-%d-%d", runID, round, n), watch, stderr))
			}
		}
	}
	for n, wcs := range rounds {
		res[n].Writes = medianWrites(wcs)
	}
	return res, nil
}

// ensureIndexTable creates the scenario's table and reports whether it is
// new. A kept table (-index-table) that exists already is taken as
// loaded by an earlier run, with any indexes it has dropped.
func ensureIndexTable(ctx context.Context, c *tableapi.Client, table string, kept bool) (fresh bool, err error) {
	err = c.CreateTable(ctx, table)
	switch {
	case err == nil:
		return true, nil
	case kept && strings.Contains(err.Error(), "TableAlreadyExists"):
		return false, setIndexes(ctx, c, table, 0)
	}
	return false, fmt.Errorf("create table: %w", err)
}

// planNames are the properties of the first n indexes of indexPlan.
func planNames(n int) []string {
	out := []string{}
	for _, ix := range indexPlan[:n] {
		out = append(out, ix.property)
	}
	return out
}

// setIndexesTimed is setIndexes that reports each build's time.
func setIndexesTimed(ctx context.Context, cfg *config, c *tableapi.Client, table string, n int, stderr io.Writer) error {
	t0 := time.Now()
	if err := setIndexes(ctx, c, table, n); err != nil {
		return err
	}
	if cfg.progress > 0 {
		fmt.Fprintf(stderr, "%s: indexes %s ready in %s\n", scenarioPropertyIndex, indexNames(planNames(n)), time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

// setIndexes leaves table with the first n indexes of indexPlan: it drops
// the others it has and creates those it lacks, one after the other.
func setIndexes(ctx context.Context, c *tableapi.Client, table string, n int) error {
	list, err := c.Indexes(ctx, table)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, ix := range list {
		want := false
		for _, p := range indexPlan[:n] {
			if ix.Property == p.property && ix.Type == "Edm."+p.edmType && !ix.AfterPartitionKey && ix.State == "ready" {
				want = true
			}
		}
		if !want {
			if err := c.DropIndex(ctx, table, ix.Name); err != nil {
				return fmt.Errorf("index on %s: %w", ix.Property, err)
			}
			continue
		}
		have[ix.Property] = true
	}
	for _, p := range indexPlan[:n] {
		if have[p.property] {
			continue
		}
		if err := createIndex(ctx, c, table, p.property, p.edmType); err != nil {
			return fmt.Errorf("index on %s: %w", p.property, err)
		}
	}
	return nil
}

// medianWrites is, per write kind of the rounds wcs (in the order of the
// first round), the round of median CPU per op, with every round's CPU
// per op and the operations and errors of all.
func medianWrites(wcs []writeCost) []writeCost {
	var out []writeCost
	for _, w := range wcs {
		if slices.ContainsFunc(out, func(o writeCost) bool { return o.Name == w.Name }) {
			continue
		}
		var same []writeCost
		for _, o := range wcs {
			if o.Name == w.Name {
				same = append(same, o)
			}
		}
		slices.SortFunc(same, func(a, b writeCost) int { return cmp.Compare(a.CPUPerOp["total"], b.CPUPerOp["total"]) })
		m := same[len(same)/2]
		m.Rounds = len(same)
		m.RoundsCPU = nil
		for _, o := range same {
			m.RoundsCPU = append(m.RoundsCPU, o.CPUPerOp["total"])
			if o.FirstErr != "" && m.FirstErr == "" {
				m.FirstErr = o.FirstErr
			}
		}
		m.Errors = 0
		for _, o := range same {
			m.Errors += o.Errors
		}
		out = append(out, m)
	}
	return out
}

// loadIndexSet inserts the entities of set, a batch of up to 100 of one
// partition at a time from 8 goroutines.
func loadIndexSet(ctx context.Context, c *tableapi.Client, table string, set indexSet) error {
	per := set.perPartition()
	step := min(per, batchSize)
	type span struct{ from, to int }
	var spans []span
	for p := 0; p < set.partitions; p++ {
		for from := p * per; from < (p+1)*per; from += step {
			spans = append(spans, span{from, min(from+step, (p+1)*per)})
		}
	}
	errs := make(chan error, len(spans))
	sem := make(chan struct{}, 8)
	for _, sp := range spans {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			bodies := make([][]byte, 0, sp.to-sp.from)
			for i := sp.from; i < sp.to; i++ {
				pk, rk := set.key(i)
				bodies = append(bodies, set.entity(pk, rk, i, i))
			}
			errs <- c.BatchInsert(ctx, table, bodies)
		}()
	}
	for range spans {
		if err := <-errs; err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	return nil
}

// timeQuery runs the query runs times, each to its last page, checks its
// count and returns the median, and the server side's CPU per page.
func timeQuery(ctx context.Context, c *tableapi.Client, table, filter string, want, runs int, watch *cpuWatch) (queryTiming, error) {
	qt := queryTiming{Filter: filter, Matches: want}
	var (
		cpu        cpuTotals
		totalPages int
	)
	before := watch.sample()
	type run struct {
		d     time.Duration
		pages int
	}
	var all []run
	for len(all) < runs {
		t0 := time.Now()
		n, pages, err := c.Query(ctx, table, filter, nil)
		d := time.Since(t0)
		// A 503 (ServerBusy) is retried, as the SDKs retry it, at most
		// three times, and counted in the report.
		if err != nil && strings.Contains(err.Error(), "status 503") && qt.Retries < 3 {
			qt.Retries++
			qt.FirstRetry = err.Error()
			continue
		}
		if err != nil {
			return qt, err
		}
		if n != want {
			return qt, fmt.Errorf("%d entities, want %d; pages %v", n, want, pages)
		}
		all = append(all, run{d, len(pages)})
		totalPages += len(pages)
		qt.RunsMs = append(qt.RunsMs, float64(d.Microseconds())/1000)
	}
	cpu.add(watch, before, watch.sample())
	qt.CPUPerPage = cpu.perUnit(float64(totalPages))
	slices.SortFunc(all, func(a, b run) int { return int(a.d - b.d) })
	med := all[len(all)/2]
	qt.Pages = med.pages
	qt.QueryMs = float64(med.d.Microseconds()) / 1000
	qt.PageMs = qt.QueryMs / float64(med.pages)
	return qt, nil
}

// indexWrites runs inserts of new entities (kind "insert") or upserts of
// loaded ones ("upsert") for -d or -n from -c clients and reports the
// server side's CPU per operation.
func indexWrites(ctx context.Context, cfg *config, c *tableapi.Client, table string, set indexSet, kind, run string, watch *cpuWatch, stderr io.Writer) writeCost {
	op := func(_ backend, ctx context.Context, w *worker) error {
		pk, rk, i, props := "", "", -1, 0
		if kind == "insert" {
			pk, rk = w.newKey()
		} else {
			i = w.rng.IntN(set.total)
			pk, rk = set.key(i)
			props = set.upsertProps(w.rng.IntN(1 << 30))
		}
		method, path := "PUT", tableapi.EntityPath(table, pk, rk)
		if kind == "insert" {
			method, path = "POST", "/"+table
		}
		_, err := c.Call(ctx, method, path, "", prefer, set.entity(pk, rk, i, props), 204)
		return err
	}
	sc := scenario{name: kind, op: op}
	wc := writeCost{Name: kind}
	var res result
	if cfg.warmup > 0 {
		phase(ctx, cfg, sc, nil, dataSet{}, run+"w-"+kind, cfg.warmup, 0, nil, &res)
	}
	before := watch.sample()
	lat, elapsed := phase(ctx, cfg, sc, nil, dataSet{}, run+"-"+kind, cfg.duration, cfg.count,
		&progressPrinter{w: stderr, label: scenarioPropertyIndex + " " + kind, every: cfg.progress}, &res)
	var cpu cpuTotals
	cpu.add(watch, before, watch.sample())
	wc.Ops = int64(len(lat))
	wc.OpsPerSec = float64(len(lat)) / elapsed.Seconds()
	wc.CPUPerOp = cpu.perUnit(float64(len(lat)))
	wc.Errors, wc.FirstErr = res.Errors, res.FirstError
	return wc
}

// printPropertyIndex shows the query times and write costs per number of
// indexes, and each against the run without indexes.
func printPropertyIndex(w io.Writer, cfg *config, res []indexResult) {
	if len(res) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s: %d entities over %d partitions\n", scenarioPropertyIndex, cfg.indexEntities, cfg.indexPartitions)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "indexes\tquery\tmatches\tpages\tms/query\tms/page\tspeed-up/page\tCPU µs/page\t")
	for _, r := range res {
		for k, q := range r.Queries {
			base := res[0].Queries[k].PageMs
			cpu := "-"
			if t, ok := q.CPUPerPage["total"]; ok {
				cpu = fmt.Sprintf("%.0f", t)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.1fx\t%s\t\n", indexNames(r.Indexes), q.Name, q.Matches, q.Pages, q.QueryMs, q.PageMs, base/q.PageMs, cpu)
		}
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "indexes\twrite\tops/s\tCPU µs/op\tvs no index\trounds' CPU µs/op\terrors\t")
	for _, r := range res {
		if len(r.Writes) == 0 {
			continue
		}
		for k, wc := range r.Writes {
			cpu, rel := "-", "-"
			if t, ok := wc.CPUPerOp["total"]; ok {
				cpu = fmt.Sprintf("%.1f", t)
				if len(res[0].Writes) > k {
					if b := res[0].Writes[k].CPUPerOp["total"]; b > 0 {
						rel = fmt.Sprintf("%+.1f%%", (t/b-1)*100)
					}
				}
			}
			var all []string
			for _, v := range wc.RoundsCPU {
				all = append(all, fmt.Sprintf("%.0f", v))
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%d\t\n", indexNames(r.Indexes), wc.Name, wc.OpsPerSec, cpu, rel, strings.Join(all, " "), wc.Errors)
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "(queries: median of %d, each to its last page; writes: %d clients, %s, server-side CPU from /proc, median of %d rounds)\n", cfg.indexQueries, cfg.concurrency, describeRun(cfg), cfg.indexWriteRounds)
	for _, r := range res {
		for _, q := range r.Queries {
			if q.Retries > 0 {
				fmt.Fprintf(w, "%s with %s: %d runs answered 503 and run again, first: %s\n", q.Name, indexNames(r.Indexes), q.Retries, q.FirstRetry)
			}
		}
		for _, wc := range r.Writes {
			if wc.FirstErr != "" {
				fmt.Fprintf(w, "%s with %s: %d errors, first: %s\n", wc.Name, indexNames(r.Indexes), wc.Errors, wc.FirstErr)
			}
		}
	}
}

func indexNames(props []string) string {
	if len(props) == 0 {
		return "none"
	}
	return strings.Join(props, "+")
}
