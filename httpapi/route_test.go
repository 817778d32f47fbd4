package httpapi

import (
	"strings"
	"testing"
)

func devKnown(name string) bool { return name == DevAccount }

func TestRoute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, host, uri string
		want            target
	}{
		{"tables", "127.0.0.1:10002", "/devstoreaccount1/Tables",
			target{account: DevAccount, pathStyle: true, kind: resTables}},
		{"tables with parens", "127.0.0.1:10002", "/devstoreaccount1/Tables()",
			target{account: DevAccount, pathStyle: true, kind: resTables}},
		{"one table", "127.0.0.1:10002", "/devstoreaccount1/Tables('mytable')",
			target{account: DevAccount, pathStyle: true, kind: resTable, table: "mytable"}},
		{"one table encoded quotes", "127.0.0.1:10002", "/devstoreaccount1/Tables(%27mytable%27)",
			target{account: DevAccount, pathStyle: true, kind: resTable, table: "mytable"}},
		{"entity set", "127.0.0.1:10002", "/devstoreaccount1/mytable",
			target{account: DevAccount, pathStyle: true, kind: resEntitySet, table: "mytable"}},
		{"query", "127.0.0.1:10002", "/devstoreaccount1/mytable()?%24filter=x",
			target{account: DevAccount, pathStyle: true, kind: resEntitySet, table: "mytable", rawQuery: "%24filter=x"}},
		{"batch", "127.0.0.1:10002", "/devstoreaccount1/$batch",
			target{account: DevAccount, pathStyle: true, kind: resBatch}},
		{"service no slash", "127.0.0.1:10002", "/devstoreaccount1?comp=properties&restype=service",
			target{account: DevAccount, pathStyle: true, kind: resService, rawQuery: "comp=properties&restype=service"}},
		{"service slash", "127.0.0.1:10002", "/devstoreaccount1/?restype=service&comp=properties",
			target{account: DevAccount, pathStyle: true, kind: resService, rawQuery: "restype=service&comp=properties"}},
		{"secondary", "127.0.0.1:10002", "/devstoreaccount1-secondary/Tables",
			target{account: DevAccount, secondary: true, pathStyle: true, kind: resTables}},
		{"python sdk secondary service root", "127.0.0.1:10002", "/devstoreaccount1-secondary/devstoreaccount1/?restype=service&comp=stats",
			target{account: DevAccount, secondary: true, pathStyle: true, kind: resService, rawQuery: "restype=service&comp=stats"}},
		{"go keys", "127.0.0.1:10002", "/devstoreaccount1/mytable(PartitionKey='p%27%271',RowKey='r%2F%201%3F%23%C3%A9')",
			target{account: DevAccount, pathStyle: true, kind: resEntity, table: "mytable", pk: "p'1", rk: "r/ 1?#é"}},
		{"js keys", "127.0.0.1:10002", "/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r%2F%201%3F%23%C3%A9')",
			target{account: DevAccount, pathStyle: true, kind: resEntity, table: "mytable", pk: "p'1", rk: "r/ 1?#é"}},
		{"plus is literal in path", "127.0.0.1:10002", "/devstoreaccount1/t(PartitionKey='a+b',RowKey='c%2Bd')",
			target{account: DevAccount, pathStyle: true, kind: resEntity, table: "t", pk: "a+b", rk: "c+d"}},
		{"spaces around", "127.0.0.1:10002", "/devstoreaccount1/t(PartitionKey%20=%20'a',%20RowKey='b')",
			target{account: DevAccount, pathStyle: true, kind: resEntity, table: "t", pk: "a", rk: "b"}},
		{"empty keys", "127.0.0.1:10002", "/devstoreaccount1/t(PartitionKey='',RowKey='')",
			target{account: DevAccount, pathStyle: true, kind: resEntity, table: "t"}},
		{"absolute form", "ignored", "http://127.0.0.1:10002/devstoreaccount1/Tables",
			target{account: DevAccount, pathStyle: true, kind: resTables}},
		{"host style", "devstoreaccount1.table.example.com", "/mytable()",
			target{account: DevAccount, kind: resEntitySet, table: "mytable"}},
		{"host style secondary", "devstoreaccount1-secondary.localhost:10002", "/Tables",
			target{account: DevAccount, secondary: true, kind: resTables}},
		{"localhost is path style", "localhost:10002", "/devstoreaccount1/Tables",
			target{account: DevAccount, pathStyle: true, kind: resTables}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := route(tt.host, tt.uri, devKnown, nil)
			if err != nil {
				t.Fatalf("route: %v", err)
			}
			got.rawPath = ""
			if *got != tt.want {
				t.Errorf("got  %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestRouteRejects(t *testing.T) {
	t.Parallel()
	for _, uri := range []string{
		"",
		"*",
		"/",
		"/devstoreaccount1/a/b",
		"/devstoreaccount1/t(PartitionKey='a')",
		"/devstoreaccount1/t(PartitionKey='a',RowKey='b'",
		"/devstoreaccount1/t(PartitionKey='a',RowKey='b')x",
		"/devstoreaccount1/t(RowKey='b',PartitionKey='a')",
		// Strict literals: an undoubled quote, or a key too many.
		"/devstoreaccount1/t(PartitionKey='p%271',RowKey='r2')",
		"/devstoreaccount1/t(PartitionKey='p',RowKey='a',Other='x')",
		"/devstoreaccount1/t(PartitionKey='p',RowKey='a'')",
		"/devstoreaccount1/t(PartitionKey='p',RowKey='r',PartitionKey='q')",
		"/devstoreaccount1/t(PartitionKey='p'x,RowKey='r')",
		"/devstoreaccount1/t(PartitionKey='%zz',RowKey='b')",
		"/devstoreaccount1/Tables('a'",
		"/devstoreaccount1/Tables(a)",
		"/%zz/Tables",
	} {
		if got, err := route("127.0.0.1", uri, devKnown, nil); err == nil {
			t.Errorf("route(%q) = %+v, want error", uri, *got)
		}
	}
}

// TestRouteLenientKeys: the key rule of the Go SDK's batches, which write
// quotes in keys undoubled; a doubled quote still reads as one.
func TestRouteLenientKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ uri, pk, rk string }{
		{"/devstoreaccount1/t(PartitionKey='p%271',RowKey='r2')", "p'1", "r2"},
		{"/devstoreaccount1/t(PartitionKey='p%27%271',RowKey='r2')", "p'1", "r2"},
		{"/devstoreaccount1/t(PartitionKey=''',RowKey='a'b')", "'", "a'b"},
		{"/devstoreaccount1/t(PartitionKey='p',RowKey='a',Other='x')", "p", "a',Other='x"},
	} {
		got, err := routeKeys("127.0.0.1:10002", tt.uri, devKnown, nil, true)
		if err != nil || got.kind != resEntity || got.pk != tt.pk || got.rk != tt.rk {
			t.Errorf("routeKeys(%q, lenient) = %+v, %v; want keys %q, %q", tt.uri, got, err, tt.pk, tt.rk)
		}
	}
}

func TestRouteDomains(t *testing.T) {
	t.Parallel()
	domains := []string{"table.example.com"}
	if got, err := route("devstoreaccount1.table.example.com", "/Tables", devKnown, domains); err != nil || got.pathStyle {
		t.Errorf("configured domain: %+v %v", got, err)
	}
	if got, err := route("devstoreaccount1.other.example.com", "/devstoreaccount1/Tables", devKnown, domains); err != nil || !got.pathStyle {
		t.Errorf("other domain: %+v %v", got, err)
	}
}

// FuzzRoute checks that no request-target makes the router panic and that
// every accepted entity address re-encodes to the same keys.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{
		"/devstoreaccount1/mytable(PartitionKey='p%27%271',RowKey='r%2F%201%3F%23%C3%A9')",
		"/devstoreaccount1/t(PartitionKey='p''1',RowKey='x')",
		"/devstoreaccount1/t(PartitionKey='p%271',RowKey='r2')",
		"/devstoreaccount1/Tables('x')",
		"http://h/devstoreaccount1/$batch?x=1",
		"/devstoreaccount1?comp=properties",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		got, err := route("127.0.0.1:10002", uri, devKnown, nil)
		if err != nil || got.kind != resEntity {
			return
		}
		esc := func(s string) string { return strings.ReplaceAll(s, "'", "''") }
		pk, rk, err := parseKeyPredicate("PartitionKey='"+esc(got.pk)+"',RowKey='"+esc(got.rk)+"'", false)
		if err != nil {
			t.Fatalf("re-parse of %q/%q: %v", got.pk, got.rk, err)
		}
		if pk != got.pk || rk != got.rk {
			t.Fatalf("keys %q/%q became %q/%q", got.pk, got.rk, pk, rk)
		}
	})
}
