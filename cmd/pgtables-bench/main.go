// Command pgtables-bench is a load tool for Azure Table endpoints. It runs
// fixed scenarios (insert, upsert, point-read, batch-insert,
// partition-scan, filter-scan, update-if-match, mixed) against any
// endpoint that speaks the protocol, and with -sql-url also as plain SQL
// against a PostgreSQL database: the ceiling that pgtables is measured
// against, in the same run. Setup happens outside the timed window, every
// operation's answer is checked, and the median of several repetitions is
// reported with latency percentiles. With -compare-preload the scenarios
// that read also run on a second, smaller data set, side by side, to see
// what a large table costs.
//
//	pgtables-bench -endpoint http://127.0.0.1:10002/devstoreaccount1 \
//	    -sql-url postgres://postgres@127.0.0.1:5432/postgres -c 16 -d 10s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pgtables/pgtables/tableapi"
)

const devKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// config is the command line.
type config struct {
	endpoint, account, key string
	sqlURL                 string
	scenarios              string
	concurrency            int
	duration, warmup       time.Duration
	count                  int
	preload                int
	comparePreload         int
	reps                   int
	serverPID              int
	dbURL, dbPIDs          string
	jsonOut                string
	progress               time.Duration
	skipPgtables           bool
	cpuProfile             string
	// The property-index scenario (index.go).
	indexEntities, indexPartitions int
	indexQueries                   int
	indexTable                     string // "": a table of its own, deleted after
	indexWriteRounds               int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "pgtables-bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("pgtables-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.endpoint, "endpoint", "http://127.0.0.1:10002/devstoreaccount1", "Table service endpoint (path-style or host-style)")
	fs.StringVar(&c.account, "account", "devstoreaccount1", "account name")
	fs.StringVar(&c.key, "key", devKey, "account key (base64)")
	fs.StringVar(&c.sqlURL, "sql-url", "", "PostgreSQL URL for the SQL ceiling; empty runs the endpoint only")
	fs.StringVar(&c.scenarios, "scenarios", "all", "comma-separated: insert,upsert,point-read,batch-insert,partition-scan,table-scan,filter-scan,update-if-match,mixed (all: these), and property-index (only when named: it loads -index-entities)")
	fs.IntVar(&c.preload, "preload", 10_000, "entities preloaded for the scenarios that read (a multiple of 1000)")
	fs.IntVar(&c.comparePreload, "compare-preload", 0, "also preload a second set of this many entities, alternate the repetitions of the scenarios that read between the two sets, and compare their p99 (0: off)")
	fs.IntVar(&c.concurrency, "c", 16, "concurrent clients")
	fs.DurationVar(&c.duration, "d", 10*time.Second, "timed duration of each repetition (ignored with -n)")
	fs.IntVar(&c.count, "n", 0, "operations per repetition instead of a duration")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "untimed warm-up before each repetition")
	fs.IntVar(&c.reps, "reps", 3, "repetitions; the median is reported")
	fs.IntVar(&c.serverPID, "server-pid", 0, "PID of the pgtables server, to report its CPU per operation and peak resident memory (0: the local process listening on the endpoint's port, if any)")
	fs.StringVar(&c.dbURL, "db-url", "", "database whose PostgreSQL processes' CPU is reported (on Citus, every node's); empty: -sql-url")
	fs.StringVar(&c.dbPIDs, "db-pids", "", "instead of -db-url, the postmasters whose process trees' CPU is reported: name=pid,... ")
	fs.StringVar(&c.jsonOut, "json", "", "also write the results as JSON to this file (- for stdout)")
	fs.DurationVar(&c.progress, "progress", 5*time.Second, "interval of progress lines on stderr (0: none)")
	fs.BoolVar(&c.skipPgtables, "sql-only", false, "run the SQL ceiling only")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the tool's own CPU profile to this file")
	fs.IntVar(&c.indexEntities, "index-entities", 1_000_000, "entities of the property-index scenario's table (a multiple of 1000 and of -index-partitions)")
	fs.IntVar(&c.indexPartitions, "index-partitions", 1000, "partitions of the property-index scenario's table")
	fs.IntVar(&c.indexQueries, "index-queries", 5, "runs of each query of the property-index scenario per number of indexes (the median is reported)")
	fs.StringVar(&c.indexTable, "index-table", "", "table of the property-index scenario, kept after the run and loaded only when it does not exist yet (its indexes are dropped), so that later runs skip the load; empty: a new table, deleted after")
	fs.IntVar(&c.indexWriteRounds, "index-write-rounds", 3, "rounds of the property-index scenario's writes, each with 0, 1 and 3 indexes in alternating order (the median is reported)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.concurrency < 1 || c.reps < 1 || (c.count <= 0 && c.duration <= 0) {
		return nil, errors.New("need -c >= 1, -reps >= 1 and a positive -d or -n")
	}
	if c.preload < preloadRows || c.preload%preloadRows != 0 {
		return nil, fmt.Errorf("-preload must be a positive multiple of %d", preloadRows)
	}
	// Results are told apart by their set's size, so the two sizes differ.
	if c.comparePreload < 0 || c.comparePreload%preloadRows != 0 || c.comparePreload == c.preload {
		return nil, fmt.Errorf("-compare-preload must be 0 or a positive multiple of %d other than -preload", preloadRows)
	}
	if c.skipPgtables && c.sqlURL == "" {
		return nil, errors.New("-sql-only needs -sql-url")
	}
	if c.indexPartitions < 1 || c.indexEntities < 1000 || c.indexEntities%1000 != 0 || c.indexEntities%c.indexPartitions != 0 || c.indexQueries < 1 || c.indexWriteRounds < 1 {
		return nil, errors.New("-index-entities must be a positive multiple of 1000 and of -index-partitions, -index-queries and -index-write-rounds positive")
	}
	return c, nil
}

// result is the outcome of one scenario on one backend.
type result struct {
	Scenario  string  `json:"scenario"`
	Backend   string  `json:"backend"`
	Preload   int     `json:"preload"`     // entities preloaded, when the scenario reads
	OpsPerSec float64 `json:"ops_per_sec"` // median over repetitions
	// EntitiesPerSec is OpsPerSec times the entities one operation writes
	// or reads (100 for batch-insert, 1000 for partition-scan, ...).
	EntitiesPerSec float64   `json:"entities_per_sec"`
	Ops            int64     `json:"ops"` // of the median repetition
	P50            float64   `json:"p50_ms"`
	P95            float64   `json:"p95_ms"`
	P99            float64   `json:"p99_ms"`
	Errors         int64     `json:"errors"`
	FirstError     string    `json:"first_error,omitempty"`
	Repetitions    []float64 `json:"repetitions_ops_per_sec"`
	RepetitionsP99 []float64 `json:"repetitions_p99_ms"`
	PeakRSSBytes   int64     `json:"peak_rss_bytes,omitempty"`
	// CPUPerOp is the server side's CPU in microseconds per operation over
	// all timed repetitions, per process group (pgtables, postgres, or on
	// Citus coordinator and worker:PORT) and in all ("total");
	// CPUPerEntity the same per entity written or read.
	CPUPerOp     map[string]float64 `json:"cpu_us_per_op,omitempty"`
	CPUPerEntity map[string]float64 `json:"cpu_us_per_entity,omitempty"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	names, indexBench := withoutScenario(cfg.scenarios, scenarioPropertyIndex)
	var list []scenario
	if names != "" || !indexBench {
		if list, err = findScenarios(names); err != nil {
			return err
		}
	}
	if indexBench && cfg.skipPgtables {
		return errors.New("the property-index scenario runs on the endpoint: not with -sql-only")
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var backends []backend
	var indexClient *tableapi.Client
	if !cfg.skipPgtables {
		c, err := tableapi.NewClient(cfg.endpoint, cfg.account, cfg.key)
		if err != nil {
			return err
		}
		hb := newHTTPBackend(c)
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := hb.dropTables(dctx); err != nil {
				fmt.Fprintf(stderr, "delete the run's tables: %v\n", err)
			}
		}()
		backends = append(backends, hb)
		indexClient = c
	}
	// With a database at hand, each scenario starts on a vacuumed and
	// analyzed database, so that the dead rows and stale statistics of the
	// scenarios before it do not tilt either measurement.
	settle := func(context.Context) error { return nil }
	if cfg.sqlURL != "" {
		sb, err := newSQLBackend(ctx, cfg.sqlURL, cfg.concurrency)
		if err != nil {
			return err
		}
		defer sb.pool.Close()
		settle = sb.settle
		backends = append(backends, sb)
	}
	dbURL := cfg.dbURL
	if dbURL == "" {
		dbURL = cfg.sqlURL
	}
	endpoint := cfg.endpoint
	if cfg.skipPgtables {
		endpoint = ""
	}
	watch, err := newCPUWatch(ctx, cfg.serverPID, endpoint, dbURL, cfg.dbPIDs)
	if err != nil {
		return err
	}
	for _, g := range watch.groupsOrNil() {
		if g.name == "pgtables" && cfg.serverPID == 0 {
			cfg.serverPID = g.pid // found by its port: report its memory too
		}
	}
	if watch != nil && cfg.progress > 0 {
		fmt.Fprintf(stderr, "counting the CPU of %s\n", watch.describe())
	}
	var results []result
	failed := false
	for _, sc := range list {
		rs, err := runScenario(ctx, cfg, sc, backends, settle, watch, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		for _, r := range rs {
			if r.Errors > 0 {
				failed = true
			}
		}
		results = append(results, rs...)
	}
	var indexResults []indexResult
	if indexBench {
		indexResults, err = runPropertyIndex(ctx, cfg, indexClient, watch, stderr)
		if err != nil {
			return fmt.Errorf("%s: %w", scenarioPropertyIndex, err)
		}
		for _, r := range indexResults {
			for _, wc := range r.Writes {
				if wc.Errors > 0 {
					failed = true
				}
			}
		}
	}
	if len(results) > 0 {
		printResults(stdout, cfg, results)
		printCPU(stdout, watch, results)
	}
	printPropertyIndex(stdout, cfg, indexResults)
	if cfg.jsonOut != "" {
		out := map[string]any{"property_index": indexResults, "cpu_processes": watch.describe(), "concurrency": cfg.concurrency, "preload": cfg.preload, "compare_preload": cfg.comparePreload, "duration": cfg.duration.String(), "count": cfg.count, "repetitions": cfg.reps, "results": results}
		b, _ := json.MarshalIndent(out, "", "  ")
		if cfg.jsonOut == "-" {
			fmt.Fprintln(stdout, string(b))
		} else if err := os.WriteFile(cfg.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if failed {
		return errors.New("some operations failed: the numbers above are not valid")
	}
	return nil
}

// runScenario prepares every backend, then runs warm-up and timed
// repetitions, and reports each backend's median repetition. The
// repetitions alternate between the backends (pgtables, ceiling,
// pgtables, ...), so that drift of the machine over the run (checkpoints,
// autovacuum, a neighbour's load) falls on both sides of the ratio alike.
// With -compare-preload, a scenario that reads runs on two data sets per
// backend, and their repetitions alternate too, for the same reason: the
// comparison of a large table with a small one must not take in how the
// machine changed between a run on one and a later run on the other.
func runScenario(ctx context.Context, cfg *config, sc scenario, backends []backend, settle func(context.Context) error, watch *cpuWatch, stderr io.Writer) ([]result, error) {
	sizes := []int{cfg.preload}
	if sc.preload && cfg.comparePreload > 0 {
		sizes = []int{cfg.comparePreload, cfg.preload}
	}
	type variant struct {
		b    backend
		data dataSet
	}
	var vs []variant
	for _, b := range backends {
		for k, n := range sizes {
			vb := b
			if k > 0 {
				vb = b.sibling()
			}
			vs = append(vs, variant{b: vb, data: dataSet{partitions: n / preloadRows}})
		}
	}
	for _, v := range vs {
		if sc.preload && cfg.progress > 0 {
			fmt.Fprintf(stderr, "%s on %s: loading %d entities\n", sc.name, v.b.name(), v.data.total())
		}
		err := v.b.prepare(ctx, v.data, sc.preload)
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := v.b.cleanup(cctx); err != nil {
				fmt.Fprintf(stderr, "cleanup %s on %s: %v\n", sc.name, v.b.name(), err)
			}
		}()
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", v.b.name(), err)
		}
	}
	if err := settle(ctx); err != nil {
		return nil, fmt.Errorf("vacuum: %w", err)
	}
	type rep struct {
		opsPerSec float64
		lat       []time.Duration
		ops       int64
	}
	res := make([]result, len(vs))
	reps := make([][]rep, len(vs))
	cpu := make([]cpuTotals, len(vs))
	opsAll := make([]int64, len(vs))
	var rss *rssSampler
	for j, v := range vs {
		res[j] = result{Scenario: sc.name, Backend: v.b.name()}
		if sc.preload {
			res[j].Preload = v.data.total()
		}
		if cfg.serverPID > 0 && v.b.name() == "pgtables" && rss == nil {
			rss = startRSS(cfg.serverPID)
		}
	}
	for i := 0; i < cfg.reps; i++ {
		for j, v := range vs {
			if cfg.warmup > 0 {
				phase(ctx, cfg, sc, v.b, v.data, fmt.Sprintf("w%d", i), cfg.warmup, 0, nil, &res[j])
			}
			label := fmt.Sprintf("%s on %s, repetition %d/%d", sc.name, v.b.name(), i+1, cfg.reps)
			if len(sizes) > 1 {
				label = fmt.Sprintf("%s on %s with %d entities, repetition %d/%d", sc.name, v.b.name(), v.data.total(), i+1, cfg.reps)
			}
			before := watch.sample()
			lat, elapsed := phase(ctx, cfg, sc, v.b, v.data, fmt.Sprintf("r%d", i), cfg.duration, cfg.count, &progressPrinter{w: stderr, label: label, every: cfg.progress}, &res[j])
			cpu[j].add(watch, before, watch.sample())
			opsAll[j] += int64(len(lat))
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			sort.Slice(lat, func(a, c int) bool { return lat[a] < lat[c] })
			r := rep{opsPerSec: float64(len(lat)) / elapsed.Seconds(), lat: lat, ops: int64(len(lat))}
			reps[j] = append(reps[j], r)
			res[j].Repetitions = append(res[j].Repetitions, r.opsPerSec)
			res[j].RepetitionsP99 = append(res[j].RepetitionsP99, percentile(lat, 0.99))
		}
	}
	if rss != nil {
		peak := rss.stop()
		for j, v := range vs {
			if v.b.name() == "pgtables" {
				res[j].PeakRSSBytes = peak
			}
		}
	}
	for j, v := range vs {
		sort.Slice(reps[j], func(a, c int) bool { return reps[j][a].opsPerSec < reps[j][c].opsPerSec })
		med := reps[j][len(reps[j])/2]
		res[j].OpsPerSec, res[j].Ops = med.opsPerSec, med.ops
		res[j].EntitiesPerSec = med.opsPerSec
		perOp := 1
		if sc.entities != nil {
			perOp = sc.entities(v.data)
			res[j].EntitiesPerSec *= float64(perOp)
		}
		res[j].CPUPerOp = cpu[j].perUnit(float64(opsAll[j]))
		res[j].CPUPerEntity = cpu[j].perUnit(float64(opsAll[j]) * float64(perOp))
		res[j].P50, res[j].P95, res[j].P99 = percentile(med.lat, 0.50), percentile(med.lat, 0.95), percentile(med.lat, 0.99)
	}
	return res, nil
}

// phase runs the scenario's operation from every worker for d (or until n
// operations are done) and returns the latencies of successful operations.
// Failed operations are counted in res and keep the run invalid. An
// operation in flight when d ends runs to its end, and the phase with it:
// cancelled, it would go on in the server (a write commits all the same)
// while the next phase starts, whose conditional update of that entity
// would then fail on the ETag it read before that commit, and whose CPU
// would count the cancelled one's work.
func phase(ctx context.Context, cfg *config, sc scenario, b backend, data dataSet, run string, d time.Duration, n int, pp *progressPrinter, res *result) ([]time.Duration, time.Duration) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		all     []time.Duration
		started atomic.Int64
		done    atomic.Int64
	)
	record := pp != nil
	start := time.Now()
	more := func() bool {
		if n <= 0 {
			return time.Since(start) < d
		}
		return started.Add(1) <= int64(n)
	}
	stopProgress := pp.start(&done)
	for id := 0; id < cfg.concurrency; id++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			w := &worker{id: id, of: cfg.concurrency, run: run, data: data, rng: rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))}
			var lat []time.Duration
			for ctx.Err() == nil && more() {
				t0 := time.Now()
				err := sc.op(b, ctx, w)
				if err != nil {
					if ctx.Err() != nil {
						break // the run was interrupted mid-operation
					}
					mu.Lock()
					res.Errors++
					if res.FirstError == "" {
						res.FirstError = err.Error()
					}
					mu.Unlock()
					continue
				}
				done.Add(1)
				if record {
					lat = append(lat, time.Since(t0))
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}(id)
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	return all, elapsed
}

func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i].Microseconds()) / 1000
}

// progressPrinter writes a line every interval while a long phase runs.
type progressPrinter struct {
	w     io.Writer
	label string
	every time.Duration
}

func (p *progressPrinter) start(done *atomic.Int64) func() {
	if p == nil || p.every <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	t0 := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				el := time.Since(t0)
				fmt.Fprintf(p.w, "%s: %d ops in %s (%.0f ops/s)\n", p.label, done.Load(), el.Round(time.Second), float64(done.Load())/el.Seconds())
			}
		}
	}()
	return func() { close(stop); <-finished }
}

func printResults(w io.Writer, cfg *config, results []result) {
	// A row is a scenario on one data set: pgtables and the ceiling side by side.
	type rowKey struct {
		scenario string
		preload  int
	}
	type row struct{ p, s *result }
	rows := map[rowKey]*row{}
	var order []rowKey
	for i := range results {
		r := &results[i]
		k := rowKey{r.Scenario, r.Preload}
		if rows[k] == nil {
			rows[k] = &row{}
			order = append(order, k)
		}
		if r.Backend == "sql" {
			rows[k].s = r
		} else {
			rows[k].p = r
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scenario\tpgtables ops/s\tentities/s\tp50 ms\tp95 ms\tp99 ms\tpeak RSS MiB\tsql ops/s\tentities/s\tp50 ms\tp99 ms\tratio\terrors\t\n")
	for _, k := range order {
		p, s := rows[k].p, rows[k].s
		name := k.scenario
		if cfg.comparePreload > 0 && k.preload > 0 {
			name = fmt.Sprintf("%s (%d)", k.scenario, k.preload)
		}
		cells := []string{name}
		var errs int64
		if p != nil {
			rss := "-"
			if p.PeakRSSBytes > 0 {
				rss = strconv.FormatFloat(float64(p.PeakRSSBytes)/(1<<20), 'f', 1, 64)
			}
			cells = append(cells, fmt.Sprintf("%.0f", p.OpsPerSec), fmt.Sprintf("%.0f", p.EntitiesPerSec), ms(p.P50), ms(p.P95), ms(p.P99), rss)
			errs += p.Errors
		} else {
			cells = append(cells, "-", "-", "-", "-", "-", "-")
		}
		if s != nil {
			cells = append(cells, fmt.Sprintf("%.0f", s.OpsPerSec), fmt.Sprintf("%.0f", s.EntitiesPerSec), ms(s.P50), ms(s.P99))
			errs += s.Errors
		} else {
			cells = append(cells, "-", "-", "-", "-")
		}
		if p != nil && s != nil && s.OpsPerSec > 0 {
			cells = append(cells, fmt.Sprintf("%.2f", p.OpsPerSec/s.OpsPerSec))
		} else {
			cells = append(cells, "-")
		}
		cells = append(cells, strconv.FormatInt(errs, 10))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(w, "(%d clients, %s, %d preloaded entities, median of %d repetitions)\n", cfg.concurrency, describeRun(cfg), cfg.preload, cfg.reps)
	if cfg.comparePreload > 0 {
		for _, line := range compareSizes(cfg, results) {
			fmt.Fprintln(w, line)
		}
	}
	for _, r := range results {
		if r.FirstError != "" {
			fmt.Fprintf(w, "%s on %s: %d errors, first: %s\n", r.Scenario, r.Backend, r.Errors, r.FirstError)
		}
	}
}

// compareSizes describes, per scenario and backend, the p99 latency on the
// -preload set over the p99 on the -compare-preload set: that of the median
// repetitions, and the median of the ratios of repetitions run side by side.
func compareSizes(cfg *config, results []result) []string {
	var lines []string
	for i := range results {
		small := &results[i]
		if small.Preload != cfg.comparePreload {
			continue
		}
		for j := range results {
			large := &results[j]
			if large.Scenario != small.Scenario || large.Backend != small.Backend || large.Preload != cfg.preload {
				continue
			}
			var pairs []float64
			for k := range min(len(small.RepetitionsP99), len(large.RepetitionsP99)) {
				if small.RepetitionsP99[k] > 0 {
					pairs = append(pairs, large.RepetitionsP99[k]/small.RepetitionsP99[k])
				}
			}
			if small.P99 <= 0 || len(pairs) == 0 {
				continue
			}
			sort.Float64s(pairs)
			parts := make([]string, len(pairs))
			for k, v := range pairs {
				parts[k] = strconv.FormatFloat(v, 'f', 2, 64)
			}
			lines = append(lines, fmt.Sprintf("%s on %s: p99 with %d entities over p99 with %d: %.2f (%s / %s ms); side by side, repetition by repetition: median %.2f of %s",
				small.Scenario, small.Backend, large.Preload, small.Preload, large.P99/small.P99, ms(large.P99), ms(small.P99), pairs[len(pairs)/2], strings.Join(parts, ", ")))
		}
	}
	return lines
}

// printCPU shows the server side's CPU per operation (per entity for the
// scenarios whose operations hold many), in all and per process group.
func printCPU(w io.Writer, watch *cpuWatch, results []result) {
	if watch == nil {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "scenario\tbackend\tunit\tCPU µs total"
	for _, g := range watch.groups {
		head += "\t" + g.name
	}
	fmt.Fprintln(tw, head+"\t")
	for _, r := range results {
		m, unit := r.CPUPerOp, "op"
		if r.CPUPerEntity != nil && r.CPUPerEntity["total"] != m["total"] {
			m, unit = r.CPUPerEntity, "entity"
		}
		if m == nil {
			continue
		}
		name := r.Scenario
		if r.Preload > 0 {
			name = fmt.Sprintf("%s (%d)", r.Scenario, r.Preload)
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%.1f", name, r.Backend, unit, m["total"])
		for _, g := range watch.groups {
			line += fmt.Sprintf("\t%.1f", m[g.name])
		}
		fmt.Fprintln(tw, line+"\t")
	}
	tw.Flush()
	fmt.Fprintf(w, "(server-side CPU over all timed repetitions, from /proc: %s)\n", watch.describe())
}

func ms(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func describeRun(cfg *config) string {
	if cfg.count > 0 {
		return fmt.Sprintf("%d operations each", cfg.count)
	}
	return cfg.duration.String() + " each"
}

// rssSampler records the peak resident memory of a process.
type rssSampler struct {
	stopc chan struct{}
	peak  chan int64
}

func startRSS(pid int) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{}), peak: make(chan int64, 1)}
	go func() {
		var peak int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if v := readRSS(pid); v > peak {
				peak = v
			}
			select {
			case <-s.stopc:
				s.peak <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() int64 { close(s.stopc); return <-s.peak }

func readRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}
