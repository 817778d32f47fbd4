package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testserver"
)

// serve starts pgtables on a fresh database and returns its endpoint.
func serve(t *testing.T) string {
	t.Helper()
	s := testserver.Start(t, testserver.Database(t), testserver.Config{MaxConns: 8})
	return s.URL + "/" + httpapi.DevAccount
}

// The property-index scenario, at a tiny size: every query it times
// returned exactly its matches (it fails otherwise), with every number of
// indexes, and the writes ran without errors in every round, with 0, 1
// and 3 indexes. A second run on the kept table finds it loaded and
// without the indexes of the first.
func TestPropertyIndexScenario(t *testing.T) {
	t.Parallel()
	endpoint := serve(t)
	for pass := range 2 {
		jsonOut := filepath.Join(t.TempDir(), "out.json")
		var stdout, stderr bytes.Buffer
		args := []string{"-endpoint", endpoint, "-scenarios", scenarioPropertyIndex,
			"-index-entities", "3000", "-index-partitions", "6", "-index-queries", "2", "-index-write-rounds", "2",
			"-index-table", "pgtixkept", "-n", "40", "-c", "2", "-warmup", "0", "-progress", "1ns", "-json", jsonOut}
		if err := run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("run %d: %v\n%s\n%s", pass, err, stdout.String(), stderr.String())
		}
		if loaded := strings.Contains(stderr.String(), "loaded 3000 entities"); loaded != (pass == 0) {
			t.Errorf("run %d: loaded the table %v, want %v:\n%s", pass, loaded, pass == 0, stderr.String())
		}
		b, err := os.ReadFile(jsonOut)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			PropertyIndex []indexResult `json:"property_index"`
		}
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if len(out.PropertyIndex) != len(indexPlan)+1 {
			t.Fatalf("%d measurements, want one per number of indexes 0..%d:\n%s", len(out.PropertyIndex), len(indexPlan), stdout.String())
		}
		for k, r := range out.PropertyIndex {
			writes := 0
			if slices.Contains(writeConfigs, k) {
				writes = 2
			}
			if len(r.Indexes) != k || len(r.Queries) != 2 || len(r.Writes) != writes {
				t.Errorf("measurement %d: indexes %v, %d queries, %d writes; want %d indexes, 2 queries, %d writes", k, r.Indexes, len(r.Queries), len(r.Writes), k, writes)
			}
			for _, q := range r.Queries {
				if _, ok := q.CPUPerPage["pgtables"]; q.Matches != 3 || q.Pages < 1 || len(q.RunsMs) != 2 || !ok {
					t.Errorf("with %v, %s: %d matches in %d pages, %d runs, CPU %v; want 3 matches, 2 runs, the server's CPU", r.Indexes, q.Name, q.Matches, q.Pages, len(q.RunsMs), q.CPUPerPage)
				}
			}
			for _, w := range r.Writes {
				// The server is this process, found by its port.
				if _, ok := w.CPUPerOp["pgtables"]; w.Ops != 40 || w.Errors != 0 || !ok || w.Rounds != 2 || len(w.RoundsCPU) != 2 {
					t.Errorf("with %v, %s: %d ops, %d errors (%s), CPU %v, %d rounds %v; want 40, none, the server's CPU, 2 rounds", r.Indexes, w.Name, w.Ops, w.Errors, w.FirstErr, w.CPUPerOp, w.Rounds, w.RoundsCPU)
				}
			}
		}
		if !strings.Contains(stdout.String(), "Age+Seen+Name") {
			t.Errorf("the report names no run with all three indexes:\n%s", stdout.String())
		}
	}
}

func TestIndexSetData(t *testing.T) {
	t.Parallel()
	for _, set := range []indexSet{{total: 3000, partitions: 6}, {total: 1_000_000, partitions: 1000}} {
		ages, seen := 0, map[int64]bool{}
		_, want := set.seenRange()
		lo := int64(set.total / 2)
		inRange := 0
		for i := range set.total {
			if set.age(i) == ageMatch {
				ages++
			}
			s := set.seen(i)
			if seen[s] || s < 0 || s >= int64(set.total) {
				t.Fatalf("%+v: Seen of %d is %d, again or out of range", set, i, s)
			}
			seen[s] = true
			if s >= lo && s < lo+int64(set.total/1000) {
				inRange++
			}
		}
		if ages != set.total/1000 || inRange != want {
			t.Errorf("%+v: %d with Age %d and %d in the Seen range; want %d and %d", set, ages, ageMatch, inRange, set.total/1000, want)
		}
	}
}

// An upsert of the scenario changes the stored properties (a rewrite of
// the same bytes would be a HOT update whatever the indexes) but keeps
// the Age and Seen that the queries count.
func TestIndexUpsertChangesEntity(t *testing.T) {
	t.Parallel()
	set := indexSet{total: 3000, partitions: 6}
	for _, i := range []int{0, 42, 2999} {
		pk, rk := set.key(i)
		var loaded, upserted map[string]any
		if err := json.Unmarshal(set.entity(pk, rk, i, i), &loaded); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(set.entity(pk, rk, i, set.upsertProps(0)), &upserted); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"PartitionKey", "RowKey", "Age", "Seen"} {
			if loaded[p] != upserted[p] {
				t.Errorf("entity %d: %s %v loaded, %v upserted; want the same", i, p, loaded[p], upserted[p])
			}
		}
		if loaded["Name"] == upserted["Name"] {
			t.Errorf("entity %d: the upsert writes the Name it was loaded with (%v)", i, loaded["Name"])
		}
	}
}
