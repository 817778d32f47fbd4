package integration

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// racers is how many clients race for one entity.
const racers = 20

// outcome is the result of one racing request.
type outcome struct {
	i      int
	status int // 0 for success
	code   string
	etag   azcore.ETag
}

// race runs fn(i) for racers goroutines released at the same moment.
func race(t *testing.T, fn func(i int) (azcore.ETag, error)) []outcome {
	t.Helper()
	start := make(chan struct{})
	out := make([]outcome, racers)
	var wg sync.WaitGroup
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			etag, err := fn(i)
			status, code := respStatus(t, err)
			out[i] = outcome{i: i, status: status, code: code, etag: etag}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// tally counts outcomes by "status code".
func tally(out []outcome) (winners []outcome, losers map[string]int) {
	losers = map[string]int{}
	for _, o := range out {
		if o.status == 0 {
			winners = append(winners, o)
		} else {
			losers[fmt.Sprintf("%d %s", o.status, o.code)]++
		}
	}
	return winners, losers
}

// TestETagRaces: N clients send a conditional write with the same ETag at
// once; exactly one wins and the others are refused, because the condition
// is checked inside the write statement (TS-094, TS-095, TS-139).
func TestETagRaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	for _, mode := range []aztables.UpdateMode{aztables.UpdateModeReplace, aztables.UpdateModeMerge} {
		t.Run("Update"+string(mode), func(t *testing.T) {
			t.Parallel()
			c, _ := e.newTable()
			for round := 0; round < 3; round++ {
				add, err := c.UpsertEntity(bg, entity(t, "p", "r", map[string]any{"Winner": int32(-1), "Base": "b"}), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
				if err != nil {
					t.Fatal(err)
				}
				etag := add.ETag
				out := race(t, func(i int) (azcore.ETag, error) {
					r, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"Winner": int32(i), fmt.Sprintf("W%d", i): true}), &aztables.UpdateEntityOptions{UpdateMode: mode, IfMatch: &etag})
					return r.ETag, err
				})
				winners, losers := tally(out)
				if len(winners) != 1 || losers["412 UpdateConditionNotSatisfied"] != racers-1 {
					t.Fatalf("round %d: %d winners, losers %v", round, len(winners), losers)
				}
				w := winners[0]
				want := map[string]any{"Winner": int32(w.i), fmt.Sprintf("W%d", w.i): true}
				if mode == aztables.UpdateModeMerge {
					want["Base"] = "b"
				}
				got, etag := getEDM(t, c, "p", "r")
				if !reflect.DeepEqual(got.Properties, want) || etag != w.etag {
					t.Fatalf("round %d: entity %v etag %q, want the winner's %v etag %q", round, got.Properties, etag, want, w.etag)
				}
			}
		})
	}

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		c, table := e.newTable()
		add, err := c.AddEntity(bg, entity(t, "p", "r", nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		out := race(t, func(i int) (azcore.ETag, error) {
			_, err := c.DeleteEntity(bg, "p", "r", &aztables.DeleteEntityOptions{IfMatch: &add.ETag})
			return "", err
		})
		winners, losers := tally(out)
		// A loser's statement finds no entity any more: 404, never a
		// second success.
		if len(winners) != 1 || losers["404 ResourceNotFound"] != racers-1 {
			t.Fatalf("%d winners, losers %v", len(winners), losers)
		}
		if s := e.tableSnapshot(table); s != "" {
			t.Fatalf("entity still stored: %s", s)
		}
	})

	t.Run("ReplaceOrDelete", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		for round := 0; round < 4; round++ {
			add, err := c.UpsertEntity(bg, entity(t, "p", "r", map[string]any{"V": int32(-1)}), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
			if err != nil {
				t.Fatal(err)
			}
			etag := add.ETag
			out := race(t, func(i int) (azcore.ETag, error) {
				if i%2 == 0 {
					_, err := c.DeleteEntity(bg, "p", "r", &aztables.DeleteEntityOptions{IfMatch: &etag})
					return "", err
				}
				r, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"V": int32(i)}), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace, IfMatch: &etag})
				return r.ETag, err
			})
			winners, losers := tally(out)
			if len(winners) != 1 {
				t.Fatalf("round %d: %d winners, losers %v", round, len(winners), losers)
			}
			if w := winners[0]; w.i%2 == 0 {
				// The delete won: the others find nothing.
				if losers["404 ResourceNotFound"] != racers-1 {
					t.Fatalf("round %d: delete won, losers %v", round, losers)
				}
				_, err := c.GetEntity(bg, "p", "r", nil)
				wantRespErr(t, err, 404, "ResourceNotFound")
			} else {
				// A replace won: the others see another ETag.
				if losers["412 UpdateConditionNotSatisfied"] != racers-1 {
					t.Fatalf("round %d: replace won, losers %v", round, losers)
				}
				wantProps(t, c, "p", "r", map[string]any{"V": int32(w.i)})
			}
		}
	})

	t.Run("Insert", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		out := race(t, func(i int) (azcore.ETag, error) {
			r, err := c.AddEntity(bg, entity(t, "p", "r", map[string]any{"V": int32(i)}), nil)
			return r.ETag, err
		})
		winners, losers := tally(out)
		if len(winners) != 1 || losers["409 EntityAlreadyExists"] != racers-1 {
			t.Fatalf("%d winners, losers %v", len(winners), losers)
		}
		got, etag := getEDM(t, c, "p", "r")
		if got.Properties["V"] != int32(winners[0].i) || etag != winners[0].etag {
			t.Fatalf("stored %v, winner %d", got.Properties, winners[0].i)
		}
	})

	t.Run("InsertRawNoContent", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		var mu sync.Mutex
		statuses := map[string]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				h := map[string]string{}
				if i%2 == 0 {
					h["Prefer"] = "return-no-content"
				}
				r := e.send(rawReq{method: http.MethodPost, path: e.tablePath(table), body: entity(t, "p", "r", nil), header: h})
				mu.Lock()
				statuses[fmt.Sprintf("%d %s", r.status, r.header.Get("x-ms-error-code"))]++
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		if statuses["201 "]+statuses["204 "] != 1 || statuses["409 EntityAlreadyExists"] != racers-1 {
			t.Fatalf("statuses %v", statuses)
		}
	})

	t.Run("InsertOrMergeAllSucceed", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		out := race(t, func(i int) (azcore.ETag, error) {
			r, err := c.UpsertEntity(bg, entity(t, "p", "r", map[string]any{fmt.Sprintf("P%02d", i): int32(i)}), nil)
			return r.ETag, err
		})
		winners, losers := tally(out)
		if len(winners) != racers {
			t.Fatalf("%d succeeded, failures %v", len(winners), losers)
		}
		got := props(t, c, "p", "r")
		if len(got) != racers {
			t.Fatalf("merged entity has %d properties, want %d: %v", len(got), racers, got)
		}
	})
}

// TestConditionalHeaders covers If-Match handling: stale, foreign and
// malformed ETags and a DELETE without If-Match (rest-protocol §2.4, §3.9;
// TS-090..TS-093).
func TestConditionalHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, table := e.newTable()
	add, err := c.AddEntity(bg, entity(t, "p", "r", map[string]any{"V": int32(1)}), nil)
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.UpdateEntity(bg, entity(t, "p", "r", map[string]any{"V": int32(2)}), nil)
	if err != nil {
		t.Fatal(err)
	}
	stale := string(add.ETag)
	path := e.entityPath(table, "p", "r")
	body := entity(t, "p", "r", map[string]any{"V": int32(3)})
	azure := `W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`
	one := func(v string) []string { return []string{v} }
	tests := []struct {
		name, method string
		ifMatch      []string // the If-Match headers sent; nil: none
		xMethod      string
		status       int
		code         string
	}{
		{"ReplaceStale", "PUT", one(stale), "", 412, "UpdateConditionNotSatisfied"},
		{"MergeStale", "MERGE", one(stale), "", 412, "UpdateConditionNotSatisfied"},
		{"PatchStale", "PATCH", one(stale), "", 412, "UpdateConditionNotSatisfied"},
		{"PostMergeStale", "POST", one(stale), "MERGE", 412, "UpdateConditionNotSatisfied"},
		{"DeleteStale", "DELETE", one(stale), "", 412, "UpdateConditionNotSatisfied"},
		{"ReplaceAzureETag", "PUT", one(azure), "", 412, "UpdateConditionNotSatisfied"},
		{"MergeAzureETag", "MERGE", one(azure), "", 412, "UpdateConditionNotSatisfied"},
		{"DeleteAzureETag", "DELETE", one(azure), "", 412, "UpdateConditionNotSatisfied"},
		{"LowerCaseWeakETag", "PUT", one("w/" + azure[2:]), "", 412, "UpdateConditionNotSatisfied"},
		{"LowerCaseWeakStale", "MERGE", one("w/" + stale[2:]), "", 412, "UpdateConditionNotSatisfied"},
		{"TamperedETag", "PUT", one(tamper(string(up.ETag))), "", 412, "UpdateConditionNotSatisfied"},
		{"StrongETag", "PUT", one(`"abc"`), "", 400, "InvalidInput"},
		{"StrongCurrentETag", "MERGE", one(string(up.ETag)[2:]), "", 400, "InvalidInput"},
		{"DeleteStrongETag", "DELETE", one(`"abc"`), "", 400, "InvalidInput"},
		{"ReplaceGarbage", "PUT", one("garbage"), "", 400, "InvalidInput"},
		{"MergeGarbage", "MERGE", one("garbage"), "", 400, "InvalidInput"},
		{"DeleteGarbage", "DELETE", one("garbage"), "", 400, "InvalidInput"},
		{"UnterminatedETag", "PUT", one(`W/"abc`), "", 400, "InvalidInput"},
		{"TwoETags", "PUT", one(string(up.ETag) + ", " + stale), "", 400, "InvalidInput"},
		{"TwoIfMatchHeaders", "PUT", []string{"*", string(up.ETag)}, "", 400, "InvalidInput"},
		{"ReplaceEmptyIfMatch", "PUT", one(""), "", 400, "InvalidInput"},
		{"MergeEmptyIfMatch", "MERGE", one(""), "", 400, "InvalidInput"},
		{"PostMergeEmptyIfMatch", "POST", one(""), "MERGE", 400, "InvalidInput"},
		{"DeleteEmptyIfMatch", "DELETE", one(""), "", 400, "InvalidInput"},
		{"DeleteNoIfMatch", "DELETE", nil, "", 400, "MissingRequiredHeader"},
		{"PostDeleteNoIfMatch", "POST", nil, "DELETE", 400, "MissingRequiredHeader"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// On the entity, and on a missing one, which an If-Match
			// taken for absent would create.
			for _, p := range []string{path, e.entityPath(table, "p", "missing")} {
				before := e.tableSnapshot(table)
				req := rawReq{method: tc.method, path: p, header: map[string]string{"X-HTTP-Method": tc.xMethod}}
				for _, v := range tc.ifMatch {
					req.add = append(req.add, [2]string{"If-Match", v})
				}
				if tc.method != "DELETE" && tc.xMethod != "DELETE" {
					req.body = body
				}
				status, code := tc.status, tc.code
				if p != path && status == 412 {
					status, code = 404, "ResourceNotFound" // a condition on a missing entity
				}
				wantError(t, e.send(req), status, code)
				if e.tableSnapshot(table) != before {
					t.Fatalf("the refused request to %s changed the table", p)
				}
			}
		})
	}
	got, etag := getEDM(t, c, "p", "r")
	if etag != up.ETag || got.Properties["V"] != int32(2) {
		t.Fatalf("entity %v etag %q changed", got.Properties, etag)
	}
	// The current ETag works with every method.
	for _, m := range []struct{ method, xMethod string }{{"PUT", ""}, {"MERGE", ""}, {"PATCH", ""}, {"POST", "MERGE"}, {"POST", "PUT"}} {
		r := e.send(rawReq{method: m.method, path: path, header: map[string]string{"If-Match": string(etag), "X-HTTP-Method": m.xMethod}, body: body})
		wantStatus(t, r, 204)
		etag = azcore.ETag(r.header.Get("ETag"))
	}
	r := e.send(rawReq{method: "POST", path: path, header: map[string]string{"If-Match": string(etag), "X-HTTP-Method": "DELETE"}})
	wantStatus(t, r, 204)
	_, err = c.GetEntity(bg, "p", "r", nil)
	wantRespErr(t, err, 404, "ResourceNotFound")
}

// tamper changes the last character before the closing quote of an ETag.
func tamper(etag string) string {
	b := []byte(etag)
	i := len(b) - 2
	if b[i] == '9' {
		b[i] = '8'
	} else {
		b[i] = '9'
	}
	return string(b)
}
