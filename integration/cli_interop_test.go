package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// TestAzureCLIInterop drives the server with the Azure CLI (az storage
// table / entity / table policy / table generate-sas). az 2.45 uses the
// Python SDK azure-data-tables 12.4.x for these commands, with the CLI's own
// argument parsing on top: typed properties come from "Name@odata.type=Edm.X"
// words, "az storage entity insert" is a GET followed by an insert-or-merge
// or insert-or-replace, and the results are printed as JSON that the test
// parses. It needs az: without it the test says so and passes, unless
// PGTABLES_REQUIRE_AZ is set.
//
// Every az process gets its own configuration directory, a copy of one
// warmed up by the first command (so that later processes neither rebuild
// the command index nor look up the newest CLI version), telemetry, surveys
// and file logging off, and an HTTP(S) proxy that refuses connections for
// every host but 127.0.0.1: az never reaches the network.
func TestAzureCLIInterop(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("az")
	if err != nil {
		missingClient(t, "PGTABLES_REQUIRE_AZ", "az is not installed")
		return
	}
	e := newEnv(t)
	az := &azCLI{
		bin:      bin,
		endpoint: e.svcURL, // an IP address, never "localhost"
		conn: "DefaultEndpointsProtocol=http;AccountName=" + httpapi.DevAccount + ";AccountKey=" + httpapi.DevKey +
			";TableEndpoint=" + e.svcURL + ";",
		proxy: deadProxy(t),
		sem:   make(chan struct{}, max(2, runtime.NumCPU())),
	}
	start := time.Now()
	t.Cleanup(func() {
		t.Logf("az: %d invocations, %.1fs in az processes, %.1fs in all",
			az.calls.Load(), time.Duration(az.busy.Load()).Seconds(), time.Since(start).Seconds())
	})

	// The first command runs alone in the directory later ones copy.
	az.template = t.TempDir()
	var ex map[string]any
	az.ok(t, &ex, "storage", "table", "exists", "-n", cliName("never"))
	azWant(t, "exists on a table never created", ex["exists"], false)

	t.Run("tables", func(t *testing.T) { t.Parallel(); cliTables(t, e, az) })
	t.Run("entity types", func(t *testing.T) { t.Parallel(); cliEntityTypes(t, e, az) })
	t.Run("query", func(t *testing.T) { t.Parallel(); cliQuery(t, e, az) })
	t.Run("conditional", func(t *testing.T) { t.Parallel(); cliConditional(t, e, az) })
	t.Run("policy and sas", func(t *testing.T) { t.Parallel(); cliPolicySAS(t, e, az) })
}

// cliTables: az storage table create/exists/list/delete.
func cliTables(t *testing.T, e *env, az *azCLI) {
	name := cliName("tab")
	var res map[string]any
	az.ok(t, &res, "storage", "table", "create", "-n", name)
	azWant(t, "create", res["created"], true)
	// Without --fail-on-exist the CLI swallows the 409; with it, it shows it.
	az.fail(t, []string{"TableAlreadyExists"}, "storage", "table", "create", "-n", name, "--fail-on-exist")
	az.ok(t, &res, "storage", "table", "exists", "-n", name)
	azWant(t, "exists after create", res["exists"], true)

	// Two more tables, so that a listing of two per page has a next page.
	for _, n := range []string{name + "b", name + "c"} {
		if _, err := e.service.CreateTable(bg, n, nil); err != nil {
			t.Fatalf("create table %s: %v", n, err)
		}
	}
	// --show-next-marker appends {"nextMarker": ...} to the list.
	var page1 []map[string]any
	az.ok(t, &page1, "storage", "table", "list", "--num-results", "2", "--show-next-marker")
	var names1 []string
	marker := ""
	for _, it := range page1 {
		if m, ok := it["nextMarker"]; ok {
			marker, _ = m.(string)
			continue
		}
		names1 = append(names1, fmt.Sprint(it["name"]))
	}
	if len(names1) != 2 || marker == "" {
		t.Fatalf("table list --num-results 2 --show-next-marker: want 2 tables and a next marker, got %v", page1)
	}
	var page2 []map[string]any
	az.ok(t, &page2, "storage", "table", "list", "--marker", marker)
	all := slices.Clone(names1)
	for _, it := range page2 {
		n := fmt.Sprint(it["name"])
		if strings.ToLower(n) <= strings.ToLower(names1[1]) {
			t.Errorf("table list --marker %s: %q is not after the first page %v", marker, n, names1)
		}
		all = append(all, n)
	}
	for _, n := range []string{name, name + "b", name + "c"} {
		if !slices.Contains(all, n) {
			t.Errorf("table list (two pages): %q missing from %v", n, all)
		}
	}

	az.ok(t, &res, "storage", "table", "delete", "-n", name)
	azWant(t, "delete", res["deleted"], true)
	// delete asks "exists" first: false, and no DELETE is sent.
	az.ok(t, &res, "storage", "table", "delete", "-n", name)
	azWant(t, "delete of a deleted table", res["deleted"], false)
	az.fail(t, []string{"does not exist"}, "storage", "table", "delete", "-n", name, "--fail-not-exist")
}

// cliEntityTypes: insert with every EDM type the CLI can express, show,
// show --select, and insert --if-exists fail/merge/replace.
func cliEntityTypes(t *testing.T, e *env, az *azCLI) {
	table := cliTable(t, e, "typ")
	const guid = "c9da6455-213d-42c9-9a79-3e9149a57833"
	var ins map[string]any
	az.ok(t, &ins, "storage", "entity", "insert", "-t", table, "--entity",
		"PartitionKey=p", "RowKey=r", "Name=x",
		"Age=5", "Age@odata.type=Edm.Int32",
		"Big=9223372036854775807", "Big@odata.type=Edm.Int64",
		"Price=5.0", "Price@odata.type=Edm.Double",
		"When=2024-01-02T03:04:05Z", "When@odata.type=Edm.DateTime",
		"G="+guid, "G@odata.type=Edm.Guid",
		"Bin=AQID", "Bin@odata.type=Edm.Binary",
		"Flag=true", "Flag@odata.type=Edm.Boolean",
		"Str=007", "Str@odata.type=Edm.String",
		"Plain=7", "Float=2.5") // untyped: the CLI makes them int / float
	etag, _ := ins["etag"].(string)
	if !strings.HasPrefix(etag, `W/"datetime'`) {
		t.Errorf("insert: etag %q, want W/\"datetime'...", etag)
	}

	var got map[string]any
	az.ok(t, &got, "storage", "entity", "show", "-t", table, "--partition-key", "p", "--row-key", "r")
	azWant(t, "show PartitionKey", got["PartitionKey"], "p")
	azWant(t, "show RowKey", got["RowKey"], "r")
	azWant(t, "show Name", got["Name"], "x")
	azWant(t, "show Age (Int32)", got["Age"], json.Number("5"))
	azWantInt64(t, "show Big (Int64 beyond 2^53)", got["Big"], "9223372036854775807")
	// Python prints a float with a fraction: 5.0 is still a Double.
	azWant(t, "show Price (Double 5.0)", got["Price"], json.Number("5.0"))
	azWantTime(t, "show When (DateTime)", got["When"], "2024-01-02T03:04:05Z")
	azWant(t, "show G (Guid)", got["G"], guid)
	// The CLI base64-encodes the text given for an Edm.Binary property
	// before sending it, and shows stored bytes base64-encoded: "AQID" goes
	// out as the 4 bytes "AQID" and comes back as base64("AQID").
	azWant(t, "show Bin (Binary)", got["Bin"], "QVFJRA==")
	azWant(t, "show Flag (Boolean)", got["Flag"], true)
	azWant(t, "show Str (String of digits)", got["Str"], "007")
	azWant(t, "show Plain (untyped int)", got["Plain"], json.Number("7"))
	azWant(t, "show Float (untyped float)", got["Float"], json.Number("2.5"))
	azWant(t, "show etag", got["etag"], etag)
	if ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["Timestamp"])); err != nil || time.Since(ts).Abs() > 10*time.Minute {
		t.Errorf("show Timestamp %v: not a current time (%v)", got["Timestamp"], err)
	}

	// What the server stored, read with the Go SDK in minimal metadata.
	raw := cliRawEntity(t, e, table, "p", "r")
	for k, want := range map[string]any{
		"Name": "x", "Age": json.Number("5"), "Big@odata.type": "Edm.Int64", "Big": "9223372036854775807",
		"Price": json.Number("5.0"), "When@odata.type": "Edm.DateTime", "When": "2024-01-02T03:04:05Z",
		"G@odata.type": "Edm.Guid", "G": guid, "Bin@odata.type": "Edm.Binary", "Bin": "QVFJRA==",
		"Flag": true, "Str": "007", "Plain": json.Number("7"), "Float": json.Number("2.5"),
		"odata.etag": etag,
	} {
		azWant(t, "stored "+k, raw[k], want)
	}
	// Azure annotates neither Int32, Boolean and String nor finite Doubles
	// in minimal metadata. pgtables annotates whole-number Doubles (5.0)
	// on purpose, for clients that lose the ".0" (httpapi/respond.go), so
	// Price@odata.type is not checked: the CLI reads a Double either way.
	for _, k := range []string{"Age@odata.type", "Flag@odata.type", "Str@odata.type", "Float@odata.type"} {
		if v, ok := raw[k]; ok {
			t.Errorf("stored entity has %s=%v: minimal metadata annotates only Int64, DateTime, Guid, Binary", k, v)
		}
	}

	az.ok(t, &got, "storage", "entity", "show", "-t", table, "--partition-key", "p", "--row-key", "r",
		"--select", "Name", "Big")
	azWant(t, "show --select Name", got["Name"], "x")
	azWantInt64(t, "show --select Big", got["Big"], "9223372036854775807")
	for k := range got {
		if !slices.Contains([]string{"Name", "Big", "Timestamp", "etag"}, k) {
			t.Errorf("show --select Name Big: unexpected property %s=%v", k, got[k])
		}
	}

	// --if-exists fail (the default) reads the entity first and refuses.
	az.fail(t, []string{"already exists"}, "storage", "entity", "insert", "-t", table,
		"--entity", "PartitionKey=p", "RowKey=r", "Name=dup")
	if raw := cliRawEntity(t, e, table, "p", "r"); raw["Name"] != "x" {
		t.Errorf("after a refused insert: Name=%v, want x", raw["Name"])
	}
	// merge keeps the other properties (insert-or-merge).
	az.ok(t, &ins, "storage", "entity", "insert", "-t", table, "--if-exists", "merge",
		"--entity", "PartitionKey=p", "RowKey=r", "Name=y", "New=1")
	raw = cliRawEntity(t, e, table, "p", "r")
	azWant(t, "after insert --if-exists merge: Name", raw["Name"], "y")
	azWant(t, "after insert --if-exists merge: New", raw["New"], json.Number("1"))
	azWant(t, "after insert --if-exists merge: Big", raw["Big"], "9223372036854775807")
	azWant(t, "after insert --if-exists merge: etag", raw["odata.etag"], ins["etag"])
	// replace drops them (insert-or-replace).
	az.ok(t, &ins, "storage", "entity", "insert", "-t", table, "--if-exists", "replace",
		"--entity", "PartitionKey=p", "RowKey=r", "Only=1")
	raw = cliRawEntity(t, e, table, "p", "r")
	azWant(t, "after insert --if-exists replace: Only", raw["Only"], json.Number("1"))
	for _, k := range []string{"Name", "New", "Big", "When"} {
		if v, ok := raw[k]; ok {
			t.Errorf("after insert --if-exists replace: %s=%v still there", k, v)
		}
	}

	// Keys that need quoting and escaping in the URL, and the values at the
	// edges of their types (special doubles, Int64 minimum, 7-digit
	// DateTime fraction, a 2^53+1 Int64).
	pk, rk := "it's é", "a+b&c=d%e f"
	az.ok(t, &ins, "storage", "entity", "insert", "-t", table, "--if-exists", "replace", "--entity",
		"PartitionKey="+pk, "RowKey="+rk, `Q=he said "hi" ü`,
		"Nan=NaN", "Nan@odata.type=Edm.Double",
		"Inf=-Infinity", "Inf@odata.type=Edm.Double",
		"Min=-9223372036854775808", "Min@odata.type=Edm.Int64",
		"Odd=9007199254740993", "Odd@odata.type=Edm.Int64",
		"Frac=2024-01-02T03:04:05.1234567Z", "Frac@odata.type=Edm.DateTime",
		"F=false", "F@odata.type=Edm.Boolean",
		"Huge=1e308", "Neg=-0.5")
	az.ok(t, &got, "storage", "entity", "show", "-t", table, "--partition-key", pk, "--row-key", rk)
	azWant(t, "special keys: PartitionKey", got["PartitionKey"], pk)
	azWant(t, "special keys: RowKey", got["RowKey"], rk)
	azWant(t, "special: Q", got["Q"], `he said "hi" ü`)
	azWant(t, "special: Nan", got["Nan"], "NaN") // Python prints a bare NaN
	azWant(t, "special: Inf", got["Inf"], "-Infinity")
	azWantInt64(t, "special: Min", got["Min"], "-9223372036854775808")
	azWantInt64(t, "special: Odd", got["Odd"], "9007199254740993")
	azWantTime(t, "special: Frac (Python keeps microseconds)", got["Frac"], "2024-01-02T03:04:05.123456Z")
	azWant(t, "special: F", got["F"], false)
	azWantFloat(t, "special: Huge", got["Huge"], 1e308)
	azWantFloat(t, "special: Neg", got["Neg"], -0.5)
	raw = cliRawEntity(t, e, table, pk, rk)
	azWant(t, "special stored: Frac keeps 7 digits", raw["Frac"], "2024-01-02T03:04:05.1234567Z")
	azWant(t, "special stored: Nan", raw["Nan"], "NaN")
	azWant(t, "special stored: Inf", raw["Inf"], "-Infinity")
	azWant(t, "special stored: Odd", raw["Odd"], "9007199254740993")
}

// cliQuery: az storage entity query with --filter, --select, --num-results
// and --marker, over entities written with the Go SDK.
func cliQuery(t *testing.T, e *env, az *azCLI) {
	table := cliTable(t, e, "qry")
	c := e.service.NewClient(table)
	day0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []string
	for i := range 30 {
		rk := fmt.Sprintf("r%02d", i)
		want = append(want, rk)
		cliAdd(t, c, map[string]any{"PartitionKey": "p", "RowKey": rk, "N": i,
			"When@odata.type": "Edm.DateTime", "When": day0.AddDate(0, 0, i).Format(time.RFC3339)})
	}
	for i := range 5 {
		cliAdd(t, c, map[string]any{"PartitionKey": "q", "RowKey": fmt.Sprintf("q%d", i), "N": 100 + i,
			"Big@odata.type": "Edm.Int64", "Big": strconv.FormatInt(9007199254740990+int64(i), 10)})
	}

	var res azQueryResult
	az.ok(t, &res, "storage", "entity", "query", "-t", table, "--filter", "PartitionKey eq 'p'")
	if got := azRowKeys(res.Items); !slices.Equal(got, want) {
		t.Errorf("query PartitionKey eq 'p': row keys %v, want %v", got, want)
	}
	if len(res.NextMarker) != 0 {
		t.Errorf("query of all: next marker %v, want none", res.NextMarker)
	}
	for i, it := range res.Items {
		azWant(t, "query item PartitionKey", it["PartitionKey"], "p")
		azWant(t, "query item N", it["N"], json.Number(strconv.Itoa(i)))
		azWantTime(t, "query item When", it["When"], day0.AddDate(0, 0, i).Format(time.RFC3339))
		if _, ok := it["etag"].(string); !ok {
			t.Errorf("query item %d: no etag: %v", i, it)
		}
		if t.Failed() {
			break
		}
	}

	az.ok(t, &res, "storage", "entity", "query", "-t", table,
		"--filter", "PartitionKey eq 'p' and N ge 25", "--select", "N", "RowKey")
	if got := azRowKeys(res.Items); !slices.Equal(got, want[25:]) {
		t.Errorf("query N ge 25: row keys %v, want %v", got, want[25:])
	}
	for _, it := range res.Items {
		for k := range it {
			if !slices.Contains([]string{"N", "RowKey", "Timestamp", "etag"}, k) {
				t.Errorf("query --select N RowKey: unexpected property %s=%v", k, it[k])
			}
		}
	}

	// Paging: --num-results 10 asks for $top=10 and prints the next marker,
	// which --marker nextpartitionkey=.. nextrowkey=.. follows.
	var paged []string
	args := []string{"storage", "entity", "query", "-t", table, "--filter", "PartitionKey eq 'p'", "--num-results", "10"}
	az.ok(t, &res, args...)
	if len(res.Items) != 10 || res.NextMarker["nextpartitionkey"] == "" || res.NextMarker["nextrowkey"] == "" {
		t.Fatalf("query --num-results 10: %d items, next marker %v; want 10 and a marker", len(res.Items), res.NextMarker)
	}
	paged = append(paged, azRowKeys(res.Items)...)
	for calls := 1; len(res.NextMarker) > 0; calls++ {
		if calls == 4 {
			t.Fatalf("query --num-results 10: still a next marker after %d pages (%v)", calls, paged)
		}
		next := append(slices.Clone(args), "--marker",
			"nextpartitionkey="+res.NextMarker["nextpartitionkey"], "nextrowkey="+res.NextMarker["nextrowkey"])
		az.ok(t, &res, next...)
		if n := len(res.Items); n > 10 {
			t.Errorf("query --num-results 10 --marker: %d items", n)
		}
		paged = append(paged, azRowKeys(res.Items)...)
	}
	if !slices.Equal(paged, want) {
		t.Errorf("query in pages of 10: row keys %v, want %v", paged, want)
	}

	// An Int64 literal beyond 2^53 must compare exactly.
	az.ok(t, &res, "storage", "entity", "query", "-t", table,
		"--filter", "PartitionKey eq 'q' and Big eq 9007199254740993L")
	if got := azRowKeys(res.Items); !slices.Equal(got, []string{"q3"}) {
		t.Errorf("query Big eq 9007199254740993L: row keys %v, want [q3]", got)
	} else {
		azWantInt64(t, "query Big", res.Items[0]["Big"], "9007199254740993")
	}
	az.ok(t, &res, "storage", "entity", "query", "-t", table,
		"--filter", "PartitionKey eq 'p' and When ge datetime'2024-01-26T00:00:00Z'", "--select", "RowKey")
	if got := azRowKeys(res.Items); !slices.Equal(got, want[25:]) {
		t.Errorf("query When ge datetime'2024-01-26T00:00:00Z': row keys %v, want %v", got, want[25:])
	}
}

// cliConditional: entity merge/replace/delete with and without --if-match.
func cliConditional(t *testing.T, e *env, az *azCLI) {
	table := cliTable(t, e, "cnd")
	key := []string{"PartitionKey=p", "RowKey=r"}
	etagOf := func(m map[string]any) string {
		t.Helper()
		s, _ := m["etag"].(string)
		if s == "" {
			t.Fatalf("no etag in %v", m)
		}
		return s
	}
	var res map[string]any
	az.ok(t, &res, append([]string{"storage", "entity", "insert", "-t", table, "--entity", "Name=a", "Keep=1"}, key...)...)
	etag1 := etagOf(res)

	az.ok(t, &res, append([]string{"storage", "entity", "merge", "-t", table, "--if-match", etag1,
		"--entity", "Extra=1"}, key...)...)
	etag2 := etagOf(res)
	if etag2 == etag1 {
		t.Errorf("merge: etag unchanged %s", etag2)
	}
	raw := cliRawEntity(t, e, table, "p", "r")
	azWant(t, "after merge: Keep", raw["Keep"], json.Number("1"))
	azWant(t, "after merge: Extra", raw["Extra"], json.Number("1"))
	az.fail(t, []string{"UpdateConditionNotSatisfied"}, append([]string{"storage", "entity", "merge", "-t", table,
		"--if-match", etag1, "--entity", "Stale=1"}, key...)...)

	az.ok(t, &res, append([]string{"storage", "entity", "replace", "-t", table, "--if-match", etag2,
		"--entity", "Name=z"}, key...)...)
	etag3 := etagOf(res)
	az.fail(t, []string{"UpdateConditionNotSatisfied"}, append([]string{"storage", "entity", "replace", "-t", table,
		"--if-match", etag2, "--entity", "Stale=1"}, key...)...)
	// Without --if-match the CLI sends If-Match: *.
	az.ok(t, &res, append([]string{"storage", "entity", "merge", "-t", table, "--entity", "Late=1"}, key...)...)
	etag4 := etagOf(res)
	az.ok(t, &res, "storage", "entity", "show", "-t", table, "--partition-key", "p", "--row-key", "r")
	azWant(t, "after replace and merge: Name", res["Name"], "z")
	azWant(t, "after replace and merge: Late", res["Late"], json.Number("1"))
	azWant(t, "after replace and merge: etag", res["etag"], etag4)
	for _, k := range []string{"Keep", "Extra", "Stale"} {
		if v, ok := res[k]; ok {
			t.Errorf("after replace: %s=%v still there", k, v)
		}
	}
	// If-Match: * needs an entity.
	az.fail(t, []string{"ResourceNotFound"}, "storage", "entity", "merge", "-t", table,
		"--entity", "PartitionKey=p", "RowKey=missing", "X=1")

	az.fail(t, []string{"UpdateConditionNotSatisfied"}, "storage", "entity", "delete", "-t", table,
		"--partition-key", "p", "--row-key", "r", "--if-match", etag3)
	az.ok(t, &res, "storage", "entity", "delete", "-t", table, "--partition-key", "p", "--row-key", "r",
		"--if-match", etag4)
	code, stderr := az.fail(t, []string{"ResourceNotFound"}, "storage", "entity", "show", "-t", table,
		"--partition-key", "p", "--row-key", "r")
	if code != 3 {
		t.Errorf("show of a deleted entity: exit code %d, want 3 (not found)\n%s", code, stderr)
	}
	// The SDK swallows the 404 of a delete: the CLI succeeds, with null.
	az.ok(t, &res, "storage", "entity", "delete", "-t", table, "--partition-key", "p", "--row-key", "r")
	azWant(t, "delete of a deleted entity", res["deleted"], nil)
}

// cliPolicySAS: stored access policies, table SAS (ad hoc and from a
// policy) used with --sas-token, and account name and key without a
// connection string.
func cliPolicySAS(t *testing.T, e *env, az *azCLI) {
	table := cliTable(t, e, "sas")
	c := e.service.NewClient(table)
	cliAdd(t, c, map[string]any{"PartitionKey": "p", "RowKey": "1", "Name": "one"})
	cliAdd(t, c, map[string]any{"PartitionKey": "q", "RowKey": "2", "Name": "two"})

	az.ok(t, nil, "storage", "table", "policy", "create", "-t", table, "-n", "pol1", "--permissions", "raud",
		"--start", "2020-01-01T00:00:00Z", "--expiry", "2099-01-01T00:00:00Z")
	az.ok(t, nil, "storage", "table", "policy", "create", "-t", table, "-n", "pol2", "--permissions", "r",
		"--expiry", "2099-01-01T00:00:00Z")
	var pols map[string]map[string]any
	az.ok(t, &pols, "storage", "table", "policy", "list", "-t", table)
	if len(pols) != 2 {
		t.Errorf("policy list: %v, want pol1 and pol2", pols)
	}
	azWant(t, "pol1 permission", pols["pol1"]["permission"], "raud")
	azWantTime(t, "pol1 start", pols["pol1"]["start"], "2020-01-01T00:00:00Z")
	azWantTime(t, "pol1 expiry", pols["pol1"]["expiry"], "2099-01-01T00:00:00Z")
	azWant(t, "pol2 permission", pols["pol2"]["permission"], "r")
	azWant(t, "pol2 start", pols["pol2"]["start"], nil)
	azWantTime(t, "pol2 expiry", pols["pol2"]["expiry"], "2099-01-01T00:00:00Z")
	az.ok(t, nil, "storage", "table", "policy", "delete", "-t", table, "-n", "pol2")
	var pol map[string]any
	az.ok(t, &pol, "storage", "table", "policy", "show", "-t", table, "-n", "pol1")
	azWant(t, "policy show pol1 permission", pol["permission"], "raud")
	azWantTime(t, "policy show pol1 expiry", pol["expiry"], "2099-01-01T00:00:00Z")
	if acl, err := c.GetAccessPolicy(bg, nil); err != nil {
		t.Errorf("get ACL: %v", err)
	} else if len(acl.SignedIdentifiers) != 1 || *acl.SignedIdentifiers[0].ID != "pol1" {
		t.Errorf("ACL after policy delete pol2: %d identifiers, want only pol1", len(acl.SignedIdentifiers))
	}

	// An ad-hoc read-only SAS. The CLI's expiry format has no seconds.
	var sas string
	az.ok(t, &sas, "storage", "table", "generate-sas", "-n", table, "--permissions", "r",
		"--expiry", "2099-01-01T00:00Z")
	for _, p := range []string{"sp=r", "tn=" + table, "sig="} {
		if !strings.Contains(sas, p) {
			t.Errorf("generate-sas: %q lacks %s", sas, p)
		}
	}
	var got map[string]any
	az.okSAS(t, &got, sas, "storage", "entity", "show", "-t", table, "--partition-key", "p", "--row-key", "1")
	azWant(t, "show with a read SAS", got["Name"], "one")
	// The CLI turns a 403 AuthorizationPermissionMismatch into this text.
	az.failSAS(t, []string{"do not have the required permissions"}, sas,
		"storage", "entity", "insert", "-t", table, "--entity", "PartitionKey=s", "RowKey=s")

	// A SAS that names the stored policy pol1 (raud).
	var sas2 string
	az.ok(t, &sas2, "storage", "table", "generate-sas", "-n", table, "--policy-name", "pol1")
	if !strings.Contains(sas2, "si=pol1") {
		t.Errorf("generate-sas --policy-name pol1: %q lacks si=pol1", sas2)
	}
	az.okSAS(t, nil, sas2, "storage", "entity", "insert", "-t", table, "--entity", "PartitionKey=s", "RowKey=s", "Via=pol1")
	azWant(t, "inserted with the policy SAS", cliRawEntity(t, e, table, "s", "s")["Via"], "pol1")

	// Account name and key with a table endpoint (no connection string).
	var res azQueryResult
	az.run(t, &res, true, []string{"--account-name", httpapi.DevAccount, "--account-key", httpapi.DevKey,
		"--table-endpoint", az.endpoint}, "storage", "entity", "query", "-t", table)
	if got := azRowKeys(res.Items); !slices.Equal(got, []string{"1", "2", "s"}) {
		t.Errorf("query with --account-name/--account-key/--table-endpoint: row keys %v, want [1 2 s]", got)
	}
}

// azCLI runs az against one server.
type azCLI struct {
	bin      string
	conn     string // connection string of the development account
	endpoint string // table endpoint
	proxy    string // proxy URL that refuses connections
	template string // configuration directory each process starts from a copy of
	sem      chan struct{}
	calls    atomic.Int64
	busy     atomic.Int64 // nanoseconds spent in az processes
}

// azTimeout bounds one az process; it usually takes 1-2 s.
const azTimeout = 2 * time.Minute

// azQueryResult is what az storage entity query prints.
type azQueryResult struct {
	Items      []map[string]any  `json:"items"`
	NextMarker map[string]string `json:"nextMarker"`
}

// ok runs az with the connection string, fails the test unless it
// succeeds, and decodes its JSON output into out (unless nil).
func (a *azCLI) ok(t *testing.T, out any, args ...string) {
	t.Helper()
	a.run(t, out, true, []string{"--connection-string", a.conn}, args...)
}

// okSAS is ok with a SAS and the table endpoint.
func (a *azCLI) okSAS(t *testing.T, out any, sas string, args ...string) {
	t.Helper()
	a.run(t, out, true, []string{"--sas-token", sas, "--table-endpoint", a.endpoint}, args...)
}

// fail runs az with the connection string and checks that it fails with
// an error output containing each of want. It returns the exit code and the
// error output.
func (a *azCLI) fail(t *testing.T, want []string, args ...string) (int, string) {
	t.Helper()
	return a.expectFailure(t, want, []string{"--connection-string", a.conn}, args...)
}

// failSAS is fail with a SAS and the table endpoint.
func (a *azCLI) failSAS(t *testing.T, want []string, sas string, args ...string) (int, string) {
	t.Helper()
	return a.expectFailure(t, want, []string{"--sas-token", sas, "--table-endpoint", a.endpoint}, args...)
}

func (a *azCLI) expectFailure(t *testing.T, want, auth []string, args ...string) (int, string) {
	t.Helper()
	code, stdout, stderr := a.exec(t, auth, args...)
	if code == 0 {
		t.Errorf("az %s: succeeded, want an error with %q\n%s", azArgs(args), want, stdout)
		return code, stderr
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("az %s: exit %d, error output lacks %q:\n%s", azArgs(args), code, w, stderr)
		}
	}
	return code, stderr
}

// run runs az with the credentials auth; with mustSucceed, a failure ends
// the test. It decodes the JSON output into out (unless nil).
func (a *azCLI) run(t *testing.T, out any, mustSucceed bool, auth []string, args ...string) {
	t.Helper()
	code, stdout, stderr := a.exec(t, auth, args...)
	if code != 0 {
		if mustSucceed {
			t.Fatalf("az %s: exit %d\n%s", azArgs(args), code, stderr)
		}
		t.Errorf("az %s: exit %d\n%s", azArgs(args), code, stderr)
		return
	}
	if out == nil {
		return
	}
	// Decoding into a used map would keep the keys of the last output.
	reflect.ValueOf(out).Elem().SetZero()
	dec := json.NewDecoder(bytes.NewReader(pyJSON([]byte(stdout))))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("az %s: output is not the JSON expected (%v):\n%s", azArgs(args), err, stdout)
	}
}

// exec runs one az process and returns its exit code and outputs.
func (a *azCLI) exec(t *testing.T, auth []string, args ...string) (int, string, string) {
	t.Helper()
	dir := a.template
	if a.calls.Add(1) > 1 {
		dir = t.TempDir()
		azCopyConfig(t, a.template, dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), azTimeout)
	defer cancel()
	full := append(append(slices.Clone(args), auth...), "--only-show-errors", "--output", "json")
	cmd := exec.CommandContext(ctx, a.bin, full...)
	cmd.Env = azEnv(dir, a.proxy)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	a.sem <- struct{}{}
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	<-a.sem
	a.busy.Add(int64(took))
	code := 0
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("az %s: no answer within %v\n%s%s", azArgs(args), azTimeout, stdout.Bytes(), stderr.Bytes())
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("az %s: %v", azArgs(args), err)
	}
	t.Logf("az %s: exit %d in %.1fs", azArgs(args), code, took.Seconds())
	return code, stdout.String(), stderr.String()
}

// azEnv is the environment of an az process: the test's without any Azure
// or proxy settings, then an isolated quiet configuration and a proxy that
// refuses everything but 127.0.0.1.
func azEnv(configDir, proxy string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch u := strings.ToUpper(k); {
		case strings.HasPrefix(u, "AZURE_"), strings.HasSuffix(u, "_PROXY"),
			u == "REQUESTS_CA_BUNDLE", u == "CURL_CA_BUNDLE", u == "PYTHONPATH", u == "PYTHONHOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"AZURE_CONFIG_DIR="+configDir,
		"AZURE_CORE_COLLECT_TELEMETRY=false",
		"AZURE_CORE_SURVEY_MESSAGE=false",
		"AZURE_CORE_NO_COLOR=true",
		"AZURE_CORE_ONLY_SHOW_ERRORS=true",
		"AZURE_CORE_DISABLE_CONFIRM_PROMPT=true",
		"AZURE_CORE_OUTPUT=json",
		"AZURE_LOGGING_ENABLE_LOG_FILE=false",
		"AZURE_EXTENSION_USE_DYNAMIC_INSTALL=no",
		"HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "http_proxy="+proxy, "https_proxy="+proxy,
		"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1",
		"PYTHONDONTWRITEBYTECODE=1",
	)
}

// azCopyConfig copies the files of the warmed-up configuration directory
// (command index, version check, cloud) into dir.
func azCopyConfig(t *testing.T, from, dir string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		if !ent.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ent.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// deadProxy returns a proxy URL at a local port nobody listens on.
func deadProxy(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// azArgs shows a command line, without credentials, for the log.
func azArgs(args []string) string {
	var b strings.Builder
	for i, s := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if s == "" || strings.ContainsAny(s, " '\"&|;<>()$*?!\\") {
			s = strconv.Quote(s)
		}
		b.WriteString(s)
	}
	return b.String()
}

// pyJSON makes Python's json.dumps output standard JSON: the bare NaN,
// Infinity and -Infinity it prints for special doubles become strings.
func pyJSON(b []byte) []byte {
	var out []byte
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if inString {
			out = append(out, ch)
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			continue
		}
		if ch == '"' {
			inString = true
			out = append(out, ch)
			continue
		}
		matched := false
		for _, word := range []string{"NaN", "-Infinity", "Infinity"} {
			if bytes.HasPrefix(b[i:], []byte(word)) {
				out = append(out, '"')
				out = append(out, word...)
				out = append(out, '"')
				i += len(word) - 1
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, ch)
		}
	}
	return out
}

var cliSeq atomic.Int64

// cliName returns a table name not used before.
func cliName(kind string) string {
	return fmt.Sprintf("cli%s%d%d", kind, time.Now().UnixNano()%1e9, cliSeq.Add(1))
}

// cliTable creates a table with the Go SDK and returns its name.
func cliTable(t *testing.T, e *env, kind string) string {
	t.Helper()
	name := cliName(kind)
	if _, err := e.service.CreateTable(bg, name, nil); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	return name
}

// cliAdd inserts an entity with the Go SDK.
func cliAdd(t *testing.T, c *aztables.Client, ent map[string]any) {
	t.Helper()
	b, err := json.Marshal(ent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddEntity(bg, b, nil); err != nil {
		t.Fatalf("add %v: %v", ent, err)
	}
}

// cliRawEntity reads an entity over raw HTTP (Shared Key Lite,
// minimal metadata) and returns its JSON, numbers as json.Number. Not with
// the Go SDK: GetEntity re-encodes the entity, and a Double 5.0 comes out
// as 5.
func cliRawEntity(t *testing.T, e *env, table, pk, rk string) map[string]any {
	t.Helper()
	r := e.send(rawReq{method: "GET", path: e.entityPath(table, pk, rk)})
	if r.status != http.StatusOK {
		t.Fatalf("get %q/%q: %d\n%s", pk, rk, r.status, r.body)
	}
	body := r.body
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("get %q/%q: %v\n%s", pk, rk, err, body)
	}
	return m
}

func azRowKeys(items []map[string]any) []string {
	keys := []string{}
	for _, it := range items {
		keys = append(keys, fmt.Sprint(it["RowKey"]))
	}
	return keys
}

func azWant(t *testing.T, what string, got, want any) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %#v, want %#v", what, got, want)
	}
}

// azWantInt64 checks an Int64 as the CLI shows it:
// {"edm_type": "Edm.Int64", "value": <exact integer>}.
func azWantInt64(t *testing.T, what string, got any, want string) {
	t.Helper()
	m, ok := got.(map[string]any)
	if !ok || m["edm_type"] != "Edm.Int64" || m["value"] != json.Number(want) {
		t.Errorf("%s: got %#v, want {edm_type: Edm.Int64, value: %s}", what, got, want)
	}
}

// azWantTime checks a date and time the CLI shows (Python's isoformat,
// "+00:00") against an RFC 3339 instant.
func azWantTime(t *testing.T, what string, got any, want string) {
	t.Helper()
	w, err := time.Parse(time.RFC3339Nano, want)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := got.(string)
	g, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !g.Equal(w) {
		t.Errorf("%s: got %#v, want %s", what, got, want)
	}
}

func azWantFloat(t *testing.T, what string, got any, want float64) {
	t.Helper()
	n, _ := got.(json.Number)
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != want || math.Signbit(f) != math.Signbit(want) {
		t.Errorf("%s: got %#v, want %v", what, got, want)
	}
}
