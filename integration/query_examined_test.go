package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// A query page whose filter the keys do not serve reports the rows it
// examined (header and pgtables_query_rows_examined by shape); one that
// examined many to return few is logged with the properties of its filter
// an index would serve, and carries them as a hint for the console.
func TestQueryRowsExamined(t *testing.T) {
	t.Parallel()
	// The scan always goes in chunks (ScanFirst 1ns), which count on
	// PostgreSQL and on Citus alike.
	e := newOpsEnv(t, opsConfig{http: httpapi.Config{ScanLogRows: 150}, scanFirst: time.Nanosecond})
	c, name := e.newTable()
	for p := range 3 {
		var acts []aztables.TransactionAction
		for r := range 100 {
			ent := fmt.Sprintf(`{"PartitionKey":"p%d","RowKey":"r%03d","N":%d}`, p, r, p*100+r)
			acts = append(acts, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: []byte(ent)})
		}
		if _, err := c.SubmitTransaction(context.Background(), acts, nil); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		filter   string
		returned int
		examined string // header; "": none
		hint     string // header and logged properties; "": none
	}{
		{"N eq 7", 1, "300", "N"},
		{"PartitionKey eq 'p1' and N eq 107", 1, "100", ""}, // under ScanLogRows
		{"N ge 0", 300, "300", ""},                          // returned all it read
		{"PartitionKey eq 'p1'", 100, "", ""},               // served by the key
		{"N eq 7 or RowKey eq 'r001' and Age gt 3", 1, "300", "N,Age"},
	}
	for _, tt := range tests {
		r := e.do("GET", "/"+httpapi.DevAccount+"/"+name+"()?$filter="+url.QueryEscape(tt.filter), nil, nil)
		if r.status != 200 {
			t.Fatalf("%s: status %d: %s", tt.filter, r.status, r.body)
		}
		if n := bytes.Count(r.body, []byte(`"odata.etag"`)); n != tt.returned {
			t.Errorf("%s: %d entities, want %d", tt.filter, n, tt.returned)
		}
		ex, hint := r.header.Get("x-pgtables-rows-examined"), r.header.Get("x-pgtables-index-hint")
		if ex != tt.examined || hint != tt.hint {
			t.Errorf("%s: examined %q, hint %q; want %q, %q", tt.filter, ex, hint, tt.examined, tt.hint)
		}
		if tt.hint == "" {
			continue
		}
		rec := e.logs.line(t, r.header.Get("x-ms-request-id"))
		var props []string
		for _, p := range rec["properties"].([]any) {
			props = append(props, p.(string))
		}
		if fmt.Sprint(rec["rows_examined"]) != tt.examined || rec["table"] != name || rec["shape"] != "table" || !slices.Equal(props, strings.Split(tt.hint, ",")) {
			t.Errorf("%s: logged %v", tt.filter, rec)
		}
	}
	m := e.metrics(t)
	for k, want := range map[string]float64{
		`pgtables_query_rows_examined_count{shape="table"}`:     3,
		`pgtables_query_rows_examined_sum{shape="table"}`:       900,
		`pgtables_query_rows_examined_count{shape="partition"}`: 1,
		`pgtables_query_rows_examined_sum{shape="partition"}`:   100,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
}
