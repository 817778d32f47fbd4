package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBackend records what a scenario did with it: the data set each
// instance was prepared with, and the order in which instances ran.
type fakeBackend struct {
	kind string
	id   int
	data dataSet
	log  *phaseLog
}

type phaseLog struct {
	mu    sync.Mutex
	next  int
	order []string // "<instance>/<run>" each time the running pair changes
}

func (l *phaseLog) record(id int, run string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := fmt.Sprintf("%d/%s", id, run)
	if len(l.order) == 0 || l.order[len(l.order)-1] != e {
		l.order = append(l.order, e)
	}
}

func newFake(kind string, log *phaseLog) *fakeBackend {
	log.mu.Lock()
	defer log.mu.Unlock()
	log.next++
	return &fakeBackend{kind: kind, id: log.next, log: log}
}

func (b *fakeBackend) name() string { return b.kind }
func (b *fakeBackend) prepare(_ context.Context, d dataSet, _ bool) error {
	b.data = d
	return nil
}
func (b *fakeBackend) cleanup(context.Context) error { return nil }
func (b *fakeBackend) sibling() backend              { return newFake(b.kind, b.log) }

// op fails when the worker's data set is not the one this instance holds,
// as a real backend's answer check would when keys come from another set.
func (b *fakeBackend) op(w *worker) error {
	b.log.record(b.id, w.run)
	if w.data != b.data {
		return fmt.Errorf("instance %d holds %d entities, the worker reads from %d", b.id, b.data.total(), w.data.total())
	}
	time.Sleep(50 * time.Microsecond)
	return nil
}

func (b *fakeBackend) insert(_ context.Context, w *worker) error        { return b.op(w) }
func (b *fakeBackend) upsert(_ context.Context, w *worker) error        { return b.op(w) }
func (b *fakeBackend) pointRead(_ context.Context, w *worker) error     { return b.op(w) }
func (b *fakeBackend) batchInsert(_ context.Context, w *worker) error   { return b.op(w) }
func (b *fakeBackend) partitionScan(_ context.Context, w *worker) error { return b.op(w) }
func (b *fakeBackend) tableScan(_ context.Context, w *worker) error     { return b.op(w) }
func (b *fakeBackend) filterScan(_ context.Context, w *worker) error    { return b.op(w) }
func (b *fakeBackend) updateIfMatch(_ context.Context, w *worker) error { return b.op(w) }
func (b *fakeBackend) merge(_ context.Context, w *worker) error         { return b.op(w) }
func (b *fakeBackend) insertDelete(_ context.Context, w *worker) error  { return b.op(w) }

func TestRunScenarioComparesSizesSideBySide(t *testing.T) {
	t.Parallel()
	tests := []struct {
		scenario  string
		compare   int
		preloads  []int    // of the results, in order
		order     []string // the timed phases, in order
		compLines int
	}{
		{scenario: "point-read", compare: 1000, preloads: []int{1000, 3000, 1000, 3000},
			order: []string{"1/r0", "3/r0", "2/r0", "4/r0", "1/r1", "3/r1", "2/r1", "4/r1", "1/r2", "3/r2", "2/r2", "4/r2"}, compLines: 2},
		{scenario: "point-read", compare: 0, preloads: []int{3000, 3000},
			order: []string{"1/r0", "2/r0", "1/r1", "2/r1", "1/r2", "2/r2"}},
		{scenario: "insert", compare: 1000, preloads: []int{0, 0},
			order: []string{"1/r0", "2/r0", "1/r1", "2/r1", "1/r2", "2/r2"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.scenario, tt.compare), func(t *testing.T) {
			t.Parallel()
			cfg := &config{concurrency: 2, count: 20, reps: 3, preload: 3000, comparePreload: tt.compare}
			sc, err := findScenarios(tt.scenario)
			if err != nil {
				t.Fatal(err)
			}
			log := &phaseLog{}
			backends := []backend{newFake("pgtables", log), newFake("sql", log)}
			res, err := runScenario(context.Background(), cfg, sc[0], backends, func(context.Context) error { return nil }, nil, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(tt.preloads) {
				t.Fatalf("%d results, want %d", len(res), len(tt.preloads))
			}
			for i, r := range res {
				if r.Preload != tt.preloads[i] || r.Errors != 0 || len(r.RepetitionsP99) != cfg.reps {
					t.Errorf("result %d: preload %d, errors %d (%s), %d p99s; want preload %d, no errors, %d p99s",
						i, r.Preload, r.Errors, r.FirstError, len(r.RepetitionsP99), tt.preloads[i], cfg.reps)
				}
			}
			// Ids: the two given backends are 1 and 2, their siblings 3 and 4.
			var timed []string
			for _, e := range log.order {
				if strings.Contains(e, "/r") {
					timed = append(timed, e)
				}
			}
			if strings.Join(timed, " ") != strings.Join(tt.order, " ") {
				t.Errorf("timed phases ran in the order %v, want %v", timed, tt.order)
			}
			if lines := compareSizes(cfg, res); len(lines) != tt.compLines {
				t.Errorf("size comparison: %q, want %d lines", lines, tt.compLines)
			}
		})
	}
}

func TestParseFlagsPreloads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		ok   bool
	}{
		{[]string{"-preload", "10000000", "-compare-preload", "10000"}, true},
		{[]string{"-preload", "10000", "-compare-preload", "0"}, true},
		{[]string{"-preload", "10000", "-compare-preload", "10000"}, false}, // its results would be indistinguishable
		{[]string{"-preload", "10000", "-compare-preload", "1500"}, false},
		{[]string{"-preload", "10000", "-compare-preload", "-1000"}, false},
		{[]string{"-preload", "500"}, false},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, io.Discard)
		if (err == nil) != tt.ok {
			t.Errorf("parseFlags(%q): error %v, want ok=%v", tt.args, err, tt.ok)
		}
	}
}

// TestPhaseLetsOperationsInFlightFinish ends a timed phase while every
// worker's first operation runs: each must finish, not be cancelled (a
// cancelled write would still commit in the server after the phase) and
// counted, with no error.
func TestPhaseLetsOperationsInFlightFinish(t *testing.T) {
	t.Parallel()
	slow := scenario{name: "slow", op: func(_ backend, ctx context.Context, _ *worker) error {
		select {
		case <-time.After(40 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	var res result
	lat, elapsed := phase(context.Background(), &config{concurrency: 3}, slow, nil, dataSet{}, "r", 5*time.Millisecond, 0, &progressPrinter{}, &res)
	if res.Errors != 0 || len(lat) != 3 {
		t.Fatalf("%d operations done, %d failed (%s); want 3 done, none failed", len(lat), res.Errors, res.FirstError)
	}
	if elapsed < 40*time.Millisecond {
		t.Fatalf("the phase took %v, less than its operations", elapsed)
	}
}
