package ha

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/sdkfail"
)

// requireHA is the variable with which CI asks for the tests of this
// package: with it set, a missing tool fails them instead of skipping.
const requireHA = "PGTABLES_REQUIRE_HA"

// TestFailover runs pgtables on a pg_auto_failover formation (a primary
// and a synchronous standby) with a multi-host URL and
// target_session_attrs=read-write, under writers of single inserts,
// entity group transactions and conditional updates and a reader. It
// switches the primary over (pg_autoctl perform switchover), then kills
// the primary (its keeper and postmaster, kill -9) and waits for the
// standby's promotion. A reader follows the table's change feed
// throughout (see checkFeedAfterFailover). Throughout, every failure a client sees must be a
// retryable 503 ServerBusy; with the failover wait, reads do not fail
// during the switchover. Afterwards every acknowledged write is there,
// every batch is whole or absent, and every counter equals its
// acknowledged updates. It logs what clients saw in each phase and the
// time from the promotion to pgtables' first acknowledged write.
func TestFailover(t *testing.T) {
	needTools(t, requireHA, "pg_autoctl")
	f := startFormation(t)
	ctx := context.Background()
	logSync(t, f)
	p := startPgtables(t, f.url())
	table := "failover"
	if _, err := p.service.CreateTable(ctx, table, nil); err != nil {
		t.Fatal(err)
	}
	c := p.service.NewClient(table)
	if _, err := c.AddEntity(ctx, entity(t, "read", "r", 0), nil); err != nil {
		t.Fatal(err)
	}
	feed := followFeed(t, p, table)

	const writers = 6
	var phase atomic.Value
	phase.Store("steady")
	stats := newOutcomes()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ws := make([]*writer, writers)
	for i := range ws {
		ws[i] = &writer{t: t, id: i, c: c, stats: stats, phase: &phase}
		if err := ws[i].init(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); ws[i].loop(ctx, stop) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			begun := time.Now()
			_, err := c.GetEntity(ctx, "read", "r", nil)
			stats.add(phase.Load().(string), "read", begun, err)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(3 * time.Second)

	// A planned switchover under load.
	phase.Store("switchover")
	start := time.Now()
	f.run("pg_autoctl", "perform", "switchover", "--pgdata", f.monitor)
	f.waitNodes(2*time.Minute, "primary", "secondary")
	t.Logf("switchover: %v until primary and secondary again", time.Since(start).Round(time.Millisecond))
	phase.Store("after switchover")
	time.Sleep(2 * time.Second)

	// The primary dies: keeper and postmaster, kill -9.
	old := f.primary(ctx)
	if old == "" {
		t.Fatal("no primary after the switchover")
	}
	phase.Store("failover")
	killed := time.Now()
	kill(f.groups[old])
	var promoted time.Time
	notReady := 0
	for promoted.IsZero() {
		if time.Since(killed) > 2*time.Minute {
			t.Fatalf("no promotion within 2 minutes of killing %s\nmonitor:\n%s", old, f.tail("monitor.log"))
		}
		if p.ready() != http.StatusOK {
			notReady++
		}
		if n := f.primary(ctx); n != "" && n != old {
			promoted = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	firstOK := stats.firstWriteAfter(killed, time.Minute)
	if firstOK.IsZero() {
		t.Fatal("no write failed and then succeeded within a minute of the kill")
	}
	phase.Store("after failover")
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("failover: killed %s; promotion observed on the monitor %v after the kill; first acknowledged write %v after the kill, %v after the promotion; /-/ready not ready in %d of its polls in between",
		old, promoted.Sub(killed).Round(time.Millisecond), firstOK.Sub(killed).Round(time.Millisecond),
		firstOK.Sub(promoted).Round(time.Millisecond), notReady)
	if code := p.ready(); code != http.StatusOK {
		t.Errorf("/-/ready after the failover: %d", code)
	}
	// The feed's reader reaches a write made after everything.
	last, err := c.AddEntity(ctx, entity(t, "last", "r", 0), nil)
	if err != nil {
		t.Fatalf("a write after the failover: %v", err)
	}
	feed.waitFor(t, string(last.ETag), time.Minute)
	checkFeedAfterFailover(t, ctx, feed, feed.stop(), c)

	// What is there now.
	present := map[string]map[string]bool{}
	pager := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Select: to.Ptr("PartitionKey,RowKey")})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list after the failover: %v", err)
		}
		for _, b := range page.Entities {
			pk, rk := keysOf(t, b)
			if present[pk] == nil {
				present[pk] = map[string]bool{}
			}
			present[pk][rk] = true
		}
	}
	var acked, lost, doubtful, doubtPresent, updates int
	for _, w := range ws {
		w.check(ctx, present)
		acked += w.acked
		lost += w.lost
		doubtful += w.doubtful
		doubtPresent += w.doubtPresent
		updates += int(w.count)
	}
	t.Logf("writes: %d acknowledged (inserts, batches and updates), %d lost; %d answered 503, of which %d had been committed",
		acked, lost, doubtful, doubtPresent)
	t.Logf("counters: %d updates, each counter equal to its acknowledged and committed updates", updates)
	stats.log(t)
	for _, bad := range stats.bad() {
		t.Errorf("a client saw %s: only 503 ServerBusy is retryable", bad)
	}
	// A planned switchover is shorter than the failover wait: reads wait
	// for the new primary rather than fail.
	for _, failed := range stats.failed("switchover", "read") {
		t.Errorf("a read failed during the switchover: %s", failed)
	}
}

// logSync logs the primary's synchronous standbys: pg_auto_failover makes
// the standby synchronous, so an acknowledged commit is on both nodes.
func logSync(t *testing.T, f *formation) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.url())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var names, commit string
	if err := conn.QueryRow(ctx, "SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')").Scan(&names, &commit); err != nil {
		t.Fatal(err)
	}
	if names == "" {
		t.Fatal("the primary has no synchronous standby")
	}
	t.Logf("primary: synchronous_standby_names=%q synchronous_commit=%s", names, commit)
}

func entity(t *testing.T, pk, rk string, n int64) []byte {
	t.Helper()
	return []byte(fmt.Sprintf(`{"PartitionKey":%q,"RowKey":%q,"N":%d,"N@odata.type":"Edm.Int64"}`, pk, rk, n))
}

var keyPattern = regexp.MustCompile(`"PartitionKey":"([^"]*)","RowKey":"([^"]*)"`)

func keysOf(t *testing.T, b []byte) (pk, rk string) {
	t.Helper()
	m := keyPattern.FindSubmatch(b)
	if m == nil {
		t.Fatalf("entity without keys: %s", b)
	}
	return string(m[1]), string(m[2])
}

var countPattern = regexp.MustCompile(`"N":"?(\d+)`)

// writer is one client: in turn a single insert, a batch of four inserts
// and a conditional update of its counter, each in a partition of its own.
type writer struct {
	t     *testing.T
	id    int
	c     *aztables.Client
	stats *outcomes
	phase *atomic.Value

	step    int
	begun   time.Time         // when the current request began
	inserts map[string]bool   // row key -> acknowledged (false: 503)
	batches map[string]bool   // first row key -> acknowledged (false: 503)
	etag    azcore.ETag       // of the counter; "" after a 503
	count   int64             // the counter's committed updates
	pending bool              // an update answered 503: committed or not
	errs    map[string]string // what the check found

	acked, lost, doubtful, doubtPresent int
}

func (w *writer) pk(kind string) string { return fmt.Sprintf("%s%d", kind, w.id) }

func (w *writer) init(ctx context.Context) error {
	w.inserts, w.batches, w.errs = map[string]bool{}, map[string]bool{}, map[string]string{}
	r, err := w.c.AddEntity(ctx, entity(w.t, w.pk("c"), "counter", 0), nil)
	if err != nil {
		return err
	}
	w.etag = r.ETag
	return nil
}

func (w *writer) loop(ctx context.Context, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		w.step++
		rk := fmt.Sprintf("%08d", w.step)
		w.begun = time.Now()
		switch w.step % 3 {
		case 0:
			_, err := w.c.AddEntity(ctx, entity(w.t, w.pk("i"), rk, 1), nil)
			w.record("insert", err)
			if err == nil || isBusy(err) {
				w.inserts[rk] = err == nil
			}
		case 1:
			var actions []aztables.TransactionAction
			for j := range 4 {
				actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
					Entity: entity(w.t, w.pk("b"), fmt.Sprintf("%s-%d", rk, j), 1)})
			}
			_, err := w.c.SubmitTransaction(ctx, actions, nil)
			w.record("batch", err)
			if err == nil || isBusy(err) {
				w.batches[rk] = err == nil
			}
		case 2:
			w.update(ctx)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// update adds one to the counter under its ETag. After a 503 it first
// reads the counter to learn whether that update was committed.
func (w *writer) update(ctx context.Context) {
	if w.etag == "" {
		g, err := w.c.GetEntity(ctx, w.pk("c"), "counter", nil)
		w.record("read", err)
		if err != nil {
			return
		}
		w.begun = time.Now()
		n := counterOf(g.Value)
		switch {
		case w.pending && n == w.count+1:
			w.count++
			w.doubtPresent++
		case n != w.count:
			w.errs["counter"] = fmt.Sprintf("counter read %d, want %d", n, w.count)
		}
		w.pending, w.etag = false, g.ETag
	}
	r, err := w.c.UpdateEntity(ctx, entity(w.t, w.pk("c"), "counter", w.count+1),
		&aztables.UpdateEntityOptions{IfMatch: &w.etag, UpdateMode: aztables.UpdateModeReplace})
	w.record("update", err)
	switch {
	case err == nil:
		w.count++
		w.acked++
		w.etag = r.ETag
	case isBusy(err):
		w.doubtful++
		w.pending, w.etag = true, ""
	}
}

func counterOf(b []byte) int64 {
	m := countPattern.FindSubmatch(b)
	if m == nil {
		return -1
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

func (w *writer) record(op string, err error) {
	w.stats.add(w.phase.Load().(string), op, w.begun, err)
}

// check compares what w was told with what is there.
func (w *writer) check(ctx context.Context, present map[string]map[string]bool) {
	for rk, ok := range w.inserts {
		there := present[w.pk("i")][rk]
		w.tally(ok, there, "insert "+rk)
	}
	for rk, ok := range w.batches {
		n := 0
		for j := range 4 {
			if present[w.pk("b")][fmt.Sprintf("%s-%d", rk, j)] {
				n++
			}
		}
		if n != 0 && n != 4 {
			w.t.Errorf("writer %d: batch %s partial: %d of 4 entities", w.id, rk, n)
		}
		w.tally(ok, n == 4, "batch "+rk)
	}
	if w.etag == "" {
		w.update(ctx) // resolves a pending update
	}
	g, err := w.c.GetEntity(ctx, w.pk("c"), "counter", nil)
	if err != nil {
		w.t.Errorf("writer %d: read counter: %v", w.id, err)
		return
	}
	if n := counterOf(g.Value); n != w.count {
		w.t.Errorf("writer %d: counter %d, want %d", w.id, n, w.count)
	}
	for k, v := range w.errs {
		w.t.Errorf("writer %d: %s: %s", w.id, k, v)
	}
}

func (w *writer) tally(acked, there bool, what string) {
	switch {
	case acked && !there:
		w.lost++
		w.t.Errorf("writer %d: %s acknowledged and lost", w.id, what)
	case acked:
		w.acked++
	default:
		w.doubtful++
		if there {
			w.doubtPresent++
		}
	}
}

// isBusy reports a 503 ServerBusy answer, the one failure a client may
// see during a failover.
func isBusy(err error) bool {
	status, code := sdkfail.Of(err)
	return status == http.StatusServiceUnavailable && code == "ServerBusy"
}

// outcomes counts requests by phase, operation and outcome, and notes when
// writes succeeded and requests failed.
type outcomes struct {
	mu     sync.Mutex
	counts map[string]int // "phase|op|outcome"
	oks    [][2]time.Time // begin and end of acknowledged writes
	fails  []time.Time    // ends of failed requests
}

func newOutcomes() *outcomes { return &outcomes{counts: map[string]int{}} }

func (o *outcomes) add(phase, op string, begun time.Time, err error) {
	outcome := "ok"
	if err != nil {
		status, code := sdkfail.Of(err)
		outcome = fmt.Sprintf("%d %s", status, code)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[phase+"|"+op+"|"+outcome]++
	switch {
	case err != nil:
		o.fails = append(o.fails, time.Now())
	case op != "read":
		o.oks = append(o.oks, [2]time.Time{begun, time.Now()})
	}
}

// firstWriteAfter waits up to limit for the first acknowledged write that
// began after the first failure after t (the outage t began), and returns
// when it was acknowledged; zero if none.
func (o *outcomes) firstWriteAfter(t time.Time, limit time.Duration) time.Time {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if ok := o.firstOK(t); !ok.IsZero() {
			return ok
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}
}

func (o *outcomes) firstOK(t time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	var failed time.Time
	for _, f := range o.fails {
		if f.After(t) {
			failed = f
			break
		}
	}
	if failed.IsZero() {
		return time.Time{}
	}
	for _, ok := range o.oks {
		if ok[0].After(failed) {
			return ok[1]
		}
	}
	return time.Time{}
}

func (o *outcomes) log(t *testing.T) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := make([]string, 0, len(o.counts))
	for k := range o.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("requests: %-60s %d", strings.ReplaceAll(k, "|", " / "), o.counts[k])
	}
}

// failed lists the failures of op in phase.
func (o *outcomes) failed(phase, op string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var failed []string
	for k, n := range o.counts {
		if strings.HasPrefix(k, phase+"|"+op+"|") && !strings.HasSuffix(k, "|ok") {
			failed = append(failed, fmt.Sprintf("%s (%d times)", strings.ReplaceAll(k, "|", " / "), n))
		}
	}
	return failed
}

// bad lists outcomes other than success and 503 ServerBusy.
func (o *outcomes) bad() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var bad []string
	for k, n := range o.counts {
		if !strings.HasSuffix(k, "|ok") && !strings.HasSuffix(k, "|503 ServerBusy") {
			bad = append(bad, fmt.Sprintf("%s (%d times)", strings.ReplaceAll(k, "|", " / "), n))
		}
	}
	return bad
}
