package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/tablecopy"
)

// connectionString is the connection string of e's development account.
func (e *env) connectionString() string {
	return "DefaultEndpointsProtocol=http;AccountName=" + httpapi.DevAccount + ";AccountKey=" + httpapi.DevKey + ";TableEndpoint=" + e.svcURL + ";"
}

// typedEntities reads every entity of a table with full metadata, keyed by
// PartitionKey and RowKey, without what the service makes of its own
// (ETag, Timestamp, ids): each property's JSON value and type annotation.
func typedEntities(t *testing.T, e *env, table string) map[string]map[string]any {
	t.Helper()
	all := map[string]map[string]any{}
	next := ""
	for {
		r := e.do("GET", "/"+httpapi.DevAccount+"/"+table+"()"+next, map[string]string{"Accept": "application/json;odata=fullmetadata"}, nil)
		if r.status != 200 {
			t.Fatalf("query %s: %d %s", table, r.status, r.body)
		}
		d := json.NewDecoder(bytes.NewReader(r.body))
		d.UseNumber()
		var page struct{ Value []map[string]any }
		if err := d.Decode(&page); err != nil {
			t.Fatal(err)
		}
		for _, ent := range page.Value {
			for k := range ent {
				if strings.HasPrefix(k, "odata.") || strings.HasPrefix(k, "Timestamp") {
					delete(ent, k)
				}
			}
			all[fmt.Sprint(ent["PartitionKey"])+"\x00"+fmt.Sprint(ent["RowKey"])] = ent
		}
		npk := r.header.Get("x-ms-continuation-NextPartitionKey")
		if npk == "" {
			return all
		}
		next = "?NextPartitionKey=" + url.QueryEscape(npk) + "&NextRowKey=" + url.QueryEscape(r.header.Get("x-ms-continuation-NextRowKey"))
	}
}

// everyType is an entity with every EDM type and the values that test a
// copy: NaN and the infinities, Int64 beyond 2^53, a whole-number Double,
// DateTime with 7 digits, empty Binary; and keys that need escaping. Raw
// JSON: the Go SDK cannot write NaN.
const everyType = `{"PartitionKey":"p 'quoted' + more %2F","RowKey":"r %&=é😀 ''",` +
	`"Str":"text with \"quotes\", a tab\t, é, 😀 and 𝄞","Empty":"","Int":-2147483648,` +
	`"Big@odata.type":"Edm.Int64","Big":"9223372036854775807","BigNeg@odata.type":"Edm.Int64","BigNeg":"-9007199254740993",` +
	`"Whole@odata.type":"Edm.Double","Whole":5,"Frac":1.5,"Tiny":5e-324,` +
	`"NaN@odata.type":"Edm.Double","NaN":"NaN","Inf@odata.type":"Edm.Double","Inf":"Infinity","NegInf@odata.type":"Edm.Double","NegInf":"-Infinity",` +
	`"Bool":true,"When@odata.type":"Edm.DateTime","When":"2024-02-29T23:59:59.1234567Z",` +
	`"Id@odata.type":"Edm.Guid","Id":"c3a8f2d4-1b6e-4f3a-9d2c-7e5b8a1f0c9d",` +
	`"Bytes@odata.type":"Edm.Binary","Bytes":"AAEC/v8=","NoBytes@odata.type":"Edm.Binary","NoBytes":""}`

// fillCopySource writes everyType, an entity with empty keys, and
// partitions of each entities into table of e, and returns how many.
func fillCopySource(t *testing.T, e *env, client *aztables.Client, table string, partitions, each int) int {
	t.Helper()
	ctx := context.Background()
	for _, body := range []string{everyType, `{"PartitionKey":"","RowKey":"","Only":"empty keys"}`} {
		if r := e.do("POST", "/"+httpapi.DevAccount+"/"+table, map[string]string{"Prefer": "return-no-content"}, []byte(body)); r.status != 204 {
			t.Fatalf("insert %s: %d %s", body, r.status, r.body)
		}
	}
	for p := range partitions {
		for start := 0; start < each; start += 100 {
			var acts []aztables.TransactionAction
			for i := start; i < min(start+100, each); i++ {
				acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
					Entity: batchEntity(t, fmt.Sprintf("part%02d", p), fmt.Sprintf("row%05d", i), map[string]any{"N": i, "D": float64(i), "S": strings.Repeat("x", i%50)})})
			}
			if _, err := client.SubmitTransaction(ctx, acts, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return 2 + partitions*each
}

// A table of every EDM type, with awkward keys and thousands of entities
// across partitions, copied from pgtables to a dump directory and from it
// to another pgtables, arrives entity by entity with the same keys, values
// and types; and the tables a copy leaves out stay out.
func TestCopyThroughDump(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	ctx := context.Background()
	src, dst := newEnv(t), newEnv(t)
	client, table := src.newTable()
	_, other := src.newTable()
	want := int64(fillCopySource(t, src, client, table, 22, 230)) // 5,062 entities, partitions of more than a batch
	start, expiry := mustTime("2026-01-01T00:00:00Z"), mustTime("2027-01-01T00:00:00Z")
	if _, err := client.SetAccessPolicy(ctx, &aztables.SetAccessPolicyOptions{TableACL: []*aztables.SignedIdentifier{
		{ID: to.Ptr("readers"), AccessPolicy: &aztables.AccessPolicy{Start: &start, Expiry: &expiry, Permission: to.Ptr("r")}},
		{ID: to.Ptr("writers"), AccessPolicy: &aztables.AccessPolicy{Permission: to.Ptr("au")}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.service.SetProperties(ctx, aztables.ServiceProperties{Cors: []*aztables.CorsRule{{
		AllowedOrigins: to.Ptr("https://example.com"), AllowedMethods: to.Ptr("GET,PUT"), AllowedHeaders: to.Ptr("x-ms-*"),
		ExposedHeaders: to.Ptr("x-ms-request-id"), MaxAgeInSeconds: to.Ptr(int32(600)),
	}}}, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	toDump, err := tablecopy.NewEndpoint(src.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	dump, err := tablecopy.CreateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	results, err := tablecopy.Copy(ctx, toDump, dump, tablecopy.Options{Tables: []string{table}, Policies: true})
	if err := tablecopy.CopyServiceProperties(ctx, toDump, dump); err != nil {
		t.Fatal(err)
	}
	if err := dump.Close(); err != nil {
		t.Fatal(err)
	}
	if err != nil || len(results) != 1 || results[0].Entities != want {
		t.Fatalf("copy to the dump: %+v, %v; want %d entities", results, err, want)
	}

	fromDump, err := tablecopy.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	target, err := tablecopy.NewEndpoint(dst.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	results, err = tablecopy.Copy(ctx, fromDump, target, tablecopy.Options{Policies: true})
	if err != nil || len(results) != 1 || results[0].Entities != want {
		t.Fatalf("copy from the dump: %+v, %v; want %d entities", results, err, want)
	}
	if err := tablecopy.CopyServiceProperties(ctx, fromDump, target); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/" + httpapi.DevAccount + "/" + table + "?comp=acl", "/" + httpapi.DevAccount + "/?restype=service&comp=properties"} {
		a, b := src.do("GET", path, nil, nil), dst.do("GET", path, nil, nil)
		if a.status != 200 || b.status != 200 || !bytes.Equal(a.body, b.body) || !bytes.Contains(a.body, []byte("example.com")) && !bytes.Contains(a.body, []byte("readers")) {
			t.Errorf("%s: source %d %s\ndestination %d %s", path, a.status, a.body, b.status, b.body)
		}
	}

	for _, c := range tablecopy.Verify(ctx, toDump, target, []string{table}, "") {
		if !c.Equal() || c.Source != want {
			t.Errorf("verify: %+v", c)
		}
	}
	got, orig := typedEntities(t, dst, table), typedEntities(t, src, table)
	if int64(len(orig)) != want || len(got) != len(orig) {
		t.Fatalf("%d entities arrived of %d (want %d)", len(got), len(orig), want)
	}
	for k, o := range orig {
		if g := got[k]; !reflect.DeepEqual(g, o) {
			t.Errorf("entity %q:\n got %v\nwant %v", k, g, o)
		}
	}
	if _, err := dst.service.NewClient(other).GetEntity(ctx, "p", "r", nil); err == nil || !strings.Contains(err.Error(), "TableNotFound") {
		t.Errorf("the table left out: %v", err)
	}

	// Copied again, over what is there, in key ranges at once: upserts,
	// the same result.
	results, err = tablecopy.Copy(ctx, toDump, target, tablecopy.Options{Prefix: table, Ranges: 5})
	if err != nil || len(results) != 1 || results[0].Entities != want {
		t.Fatalf("copy again, endpoint to endpoint: %+v, %v", results, err)
	}
	if got := typedEntities(t, dst, table); !reflect.DeepEqual(got, orig) {
		t.Errorf("after the second copy the tables differ")
	}
}

// A destination that answers 503 ServerBusy for a while (with Retry-After
// or without) slows the copy down; the copy completes, every entity there.
func TestCopyThroughThrottling(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	ctx := context.Background()
	src, dst := newEnv(t), newEnv(t)
	client, table := src.newTable()
	const partitions, each = 6, 150
	for p := range partitions {
		for start := 0; start < each; start += 100 {
			var acts []aztables.TransactionAction
			for i := start; i < min(start+100, each); i++ {
				acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd,
					Entity: batchEntity(t, fmt.Sprintf("p%d", p), fmt.Sprintf("r%04d", i), map[string]any{"N": i})})
			}
			if _, err := client.SubmitTransaction(ctx, acts, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	target, err := url.Parse(dst.baseURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var busy atomic.Int32
	throttle := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first writes are refused, every other one saying when to
		// come back.
		if strings.HasSuffix(r.URL.Path, "/$batch") {
			if n := busy.Add(1); n <= 6 {
				if n%2 == 0 {
					w.Header().Set("Retry-After", "1")
				}
				w.Header().Set("x-ms-error-code", "ServerBusy")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"odata.error":{"code":"ServerBusy","message":{"lang":"en-US","value":"The server is busy."}}}`)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})
	ps := httptest.NewServer(throttle)
	defer ps.Close()
	from, err := tablecopy.NewEndpoint(src.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	to, err := tablecopy.NewEndpoint(strings.Replace(dst.connectionString(), dst.baseURL, ps.URL, 1))
	if err != nil {
		t.Fatal(err)
	}
	results, err := tablecopy.Copy(ctx, from, to, tablecopy.Options{Tables: []string{table}})
	if err != nil || len(results) != 1 || results[0].Entities != partitions*each {
		t.Fatalf("copy: %+v, %v", results, err)
	}
	if n := busy.Load(); n <= 6 {
		t.Fatalf("the destination saw %d batches: the test throttled none through", n)
	}
	if got := typedEntities(t, dst, table); len(got) != partitions*each {
		t.Errorf("%d entities arrived of %d", len(got), partitions*each)
	}
}
