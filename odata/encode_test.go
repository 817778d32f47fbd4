package odata

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

const testSvc = "http://127.0.0.1:10002/devstoreaccount1"

func goldenEntity(t testing.TB) Entity {
	ts, ok1 := ParseDateTime("2024-01-02T03:04:06.7654321Z")
	when, ok2 := ParseDateTime("2024-01-02T03:04:05.1234567Z")
	if !ok1 || !ok2 {
		t.Fatal("bad test dates")
	}
	return Entity{
		PartitionKey: "pk",
		RowKey:       "rk",
		Timestamp:    ts,
		ETag:         `W/"datetime'2024-01-02T03%3A04%3A06.7654321Z'"`,
		Properties: []Property{
			prop("Age", vI32(23)),
			prop("Big", vI64(9007199254740993)),
			prop("When", vDT(when)),
			prop("D", vDbl(5)),
			prop("N", vDbl(math.NaN())),
			prop("G", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833")),
			prop("B", vBin([]byte("binary"))),
			prop("S", vStr("a\"b\\c\x00\n日")),
			prop("T", vBool(true)),
		},
	}
}

func TestEncoderEntityGolden(t *testing.T) {
	t.Parallel()
	const (
		meta  = `"odata.metadata":"` + testSvc + `/$metadata#mytable/@Element",`
		etag  = `"odata.etag":"W/\"datetime'2024-01-02T03%3A04%3A06.7654321Z'\"",`
		full  = `"odata.type":"devstoreaccount1.mytable","odata.id":"` + testSvc + `/mytable(PartitionKey='pk',RowKey='rk')",`
		link  = `"odata.editLink":"mytable(PartitionKey='pk',RowKey='rk')",`
		keys  = `"PartitionKey":"pk","RowKey":"rk",`
		ts    = `"Timestamp":"2024-01-02T03:04:06.7654321Z",`
		tsAnn = `"Timestamp@odata.type":"Edm.DateTime",`
		props = `"Age":23,"Big@odata.type":"Edm.Int64","Big":"9007199254740993",` +
			`"When@odata.type":"Edm.DateTime","When":"2024-01-02T03:04:05.1234567Z",` +
			`"D":5.0,"N@odata.type":"Edm.Double","N":"NaN",` +
			`"G@odata.type":"Edm.Guid","G":"c9da6455-213d-42c9-9a79-3e9149a57833",` +
			`"B@odata.type":"Edm.Binary","B":"YmluYXJ5",` +
			`"S":"a\"b\\c\u0000\n日","T":true`
		plain = `"Age":23,"Big":"9007199254740993","When":"2024-01-02T03:04:05.1234567Z",` +
			`"D":5.0,"N":"NaN","G":"c9da6455-213d-42c9-9a79-3e9149a57833","B":"YmluYXJ5",` +
			`"S":"a\"b\\c\u0000\n日","T":true`
	)
	tests := []struct {
		name   string
		format Format
		sel    []string
		want   string
	}{
		{"minimal", MinimalMetadata, nil, `{` + meta + etag + keys + ts + props + `}`},
		{"full", FullMetadata, nil, `{` + meta + full + etag + link + keys + tsAnn + ts + props + `}`},
		{"none", NoMetadata, nil, `{` + keys + ts + plain + `}`},
		{"select minimal", MinimalMetadata, []string{"Age", "RowKey", "Missing", "Timestamp", "Big"},
			`{` + meta + etag + `"Age":23,"RowKey":"rk","Missing":null,"Timestamp":"2024-01-02T03:04:06.7654321Z","Big@odata.type":"Edm.Int64","Big":"9007199254740993"}`},
		{"select full", FullMetadata, []string{"Timestamp", "PartitionKey"},
			`{` + meta + full + etag + link + tsAnn + `"Timestamp":"2024-01-02T03:04:06.7654321Z","PartitionKey":"pk"}`},
		{"select none", NoMetadata, []string{"Big", "Nope"}, `{"Big":"9007199254740993","Nope":null}`},
		{"select nothing present", NoMetadata, []string{"Nope"}, `{"Nope":null}`},
		{"select control names skipped", MinimalMetadata, []string{"odata.etag", "a@odata.type", "Age"}, `{` + meta + etag + `"Age":23}`},
		{"select empty list", NoMetadata, []string{}, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := goldenEntity(t)
			enc := Encoder{Format: tt.format, ServiceURL: testSvc, Account: "devstoreaccount1", Table: "mytable", Select: tt.sel}
			got := string(enc.AppendEntity([]byte("prefix:"), &e))
			if got != "prefix:"+tt.want {
				t.Errorf("\n got %s\nwant prefix:%s", got, tt.want)
			}
			if !json.Valid([]byte(got[len("prefix:"):])) {
				t.Errorf("invalid JSON")
			}
		})
	}
}

func TestEncoderEntitiesGolden(t *testing.T) {
	t.Parallel()
	e := goldenEntity(t)
	e.Properties = e.Properties[:1]
	e2 := e
	e2.RowKey, e2.ETag = "r'2", `W/"x"`
	es := []Entity{e, e2}
	tests := []struct {
		name   string
		format Format
		es     []Entity
		want   string
	}{
		{"minimal", MinimalMetadata, es, `{"odata.metadata":"` + testSvc + `/$metadata#mytable","value":[` +
			`{"odata.etag":"W/\"datetime'2024-01-02T03%3A04%3A06.7654321Z'\"","PartitionKey":"pk","RowKey":"rk","Timestamp":"2024-01-02T03:04:06.7654321Z","Age":23},` +
			`{"odata.etag":"W/\"x\"","PartitionKey":"pk","RowKey":"r'2","Timestamp":"2024-01-02T03:04:06.7654321Z","Age":23}]}`},
		{"full", FullMetadata, es[1:], `{"odata.metadata":"` + testSvc + `/$metadata#mytable","value":[` +
			`{"odata.type":"devstoreaccount1.mytable","odata.id":"` + testSvc + `/mytable(PartitionKey='pk',RowKey='r%27%272')",` +
			`"odata.etag":"W/\"x\"","odata.editLink":"mytable(PartitionKey='pk',RowKey='r%27%272')",` +
			`"PartitionKey":"pk","RowKey":"r'2","Timestamp@odata.type":"Edm.DateTime","Timestamp":"2024-01-02T03:04:06.7654321Z","Age":23}]}`},
		{"none", NoMetadata, es, `{"value":[` +
			`{"PartitionKey":"pk","RowKey":"rk","Timestamp":"2024-01-02T03:04:06.7654321Z","Age":23},` +
			`{"PartitionKey":"pk","RowKey":"r'2","Timestamp":"2024-01-02T03:04:06.7654321Z","Age":23}]}`},
		{"empty minimal", MinimalMetadata, nil, `{"odata.metadata":"` + testSvc + `/$metadata#mytable","value":[]}`},
		{"empty none", NoMetadata, nil, `{"value":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			enc := Encoder{Format: tt.format, ServiceURL: testSvc, Account: "devstoreaccount1", Table: "mytable"}
			if got := string(enc.AppendEntities(nil, tt.es)); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestEncoderEntityWithoutETag(t *testing.T) {
	t.Parallel()
	enc := Encoder{Format: MinimalMetadata, ServiceURL: testSvc, Table: "t"}
	got := string(enc.AppendEntity(nil, &Entity{PartitionKey: "p", RowKey: "r", Timestamp: MinDateTime}))
	want := `{"odata.metadata":"` + testSvc + `/$metadata#t/@Element","PartitionKey":"p","RowKey":"r","Timestamp":"1601-01-01T00:00:00Z"}`
	if got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

func TestEncoderTablesGolden(t *testing.T) {
	t.Parallel()
	const svc = "https://myaccount.table.core.windows.net"
	tests := []struct {
		name   string
		format Format
		sel    []string
		single string
		list   string
	}{
		{"minimal", MinimalMetadata, nil,
			`{"odata.metadata":"` + svc + `/$metadata#Tables/@Element","TableName":"mytable"}`,
			`{"odata.metadata":"` + svc + `/$metadata#Tables","value":[{"TableName":"mytable"},{"TableName":"mytable1"}]}`},
		{"full", FullMetadata, nil,
			`{"odata.metadata":"` + svc + `/$metadata#Tables/@Element","odata.type":"myaccount.Tables","odata.id":"` + svc + `/Tables('mytable')","odata.editLink":"Tables('mytable')","TableName":"mytable"}`,
			`{"odata.metadata":"` + svc + `/$metadata#Tables","value":[` +
				`{"odata.type":"myaccount.Tables","odata.id":"` + svc + `/Tables('mytable')","odata.editLink":"Tables('mytable')","TableName":"mytable"},` +
				`{"odata.type":"myaccount.Tables","odata.id":"` + svc + `/Tables('mytable1')","odata.editLink":"Tables('mytable1')","TableName":"mytable1"}]}`},
		{"none", NoMetadata, nil,
			`{"TableName":"mytable"}`,
			`{"value":[{"TableName":"mytable"},{"TableName":"mytable1"}]}`},
		{"select", NoMetadata, []string{"TableName", "Other"},
			`{"TableName":"mytable","Other":null}`,
			`{"value":[{"TableName":"mytable","Other":null},{"TableName":"mytable1","Other":null}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			enc := Encoder{Format: tt.format, ServiceURL: svc, Account: "myaccount", Select: tt.sel}
			if got := string(enc.AppendTable(nil, "mytable")); got != tt.single {
				t.Errorf("single\n got %s\nwant %s", got, tt.single)
			}
			if got := string(enc.AppendTables(nil, []string{"mytable", "mytable1"})); got != tt.list {
				t.Errorf("list\n got %s\nwant %s", got, tt.list)
			}
		})
	}
	enc := Encoder{ServiceURL: svc}
	if got, want := string(enc.AppendTables(nil, nil)), `{"odata.metadata":"`+svc+`/$metadata#Tables","value":[]}`; got != want {
		t.Errorf("empty list\n got %s\nwant %s", got, want)
	}
}

func TestEncoderDoubles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f          float64
		min, plain string
		whole      bool // annotated when WholeDoubleTypes asks for it
	}{
		{5, `5.0`, `5.0`, true},
		{0.1, `0.1`, `0.1`, false},
		{-1.5e-300, `-1.5E-300`, `-1.5E-300`, false},
		{math.MaxFloat64, `1.7976931348623157E+308`, `1.7976931348623157E+308`, false},
		{math.Copysign(0, -1), `-0.0`, `-0.0`, true},
		{0, `0.0`, `0.0`, true},
		{-9007199254740993, `-9007199254740992.0`, `-9007199254740992.0`, true},
		{1e20, `100000000000000000000.0`, `100000000000000000000.0`, true},
		{1e21, `1E+21`, `1E+21`, false},
		{2.5, `2.5`, `2.5`, false},
		{math.NaN(), `"NaN"`, `"NaN"`, false},
		{math.Inf(1), `"Infinity"`, `"Infinity"`, false},
		{math.Inf(-1), `"-Infinity"`, `"-Infinity"`, false},
	}
	for _, tt := range tests {
		for _, whole := range []bool{false, true} {
			e := Entity{Properties: []Property{prop("D", vDbl(tt.f))}}
			enc := Encoder{Format: NoMetadata, Select: []string{"D"}, WholeDoubleTypes: whole}
			if got := string(enc.AppendEntity(nil, &e)); got != `{"D":`+tt.plain+`}` {
				t.Errorf("%v none: %s", tt.f, got)
			}
			for _, f := range []Format{MinimalMetadata, FullMetadata} {
				enc.Format = f
				want := `"D":` + tt.min + `}`
				if tt.min[0] == '"' || whole && tt.whole {
					want = `"D@odata.type":"Edm.Double",` + want
				}
				if got := string(enc.AppendEntity(nil, &e)); !strings.HasSuffix(got, ","+want) {
					t.Errorf("%v format %d whole %v: %s, want suffix %s", tt.f, f, whole, got, want)
				}
			}
		}
	}
}

func TestAppendStringEscaping(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain", `"plain"`},
		{"\"\\/", `"\"\\/"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f" + `"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"é日😀\u2028", `"é日😀` + "\u2028" + `"`},
		{"a\xffb\xc3", `"a\ufffdb\ufffd"`},
		{"<&>", `"<&>"`},
	}
	for _, tt := range tests {
		if got := string(appendString(nil, tt.in)); got != tt.want {
			t.Errorf("appendString(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if !json.Valid(appendString(nil, tt.in)) {
			t.Errorf("appendString(%q) is not valid JSON", tt.in)
		}
	}
}

func TestEntityPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ table, pk, rk, want string }{
		{"mytable", "pk", "rk", "mytable(PartitionKey='pk',RowKey='rk')"},
		{"mytable", "p'1", "r/ 1?#é", "mytable(PartitionKey='p%27%271',RowKey='r%2F%201%3F%23%C3%A9')"},
		{"t", "", "", "t(PartitionKey='',RowKey='')"},
		{"t", "RK'@*$!%", "a+b=c:d&e~f_g.h-i,j;k", "t(PartitionKey='RK%27%27@%2A$%21%25',RowKey='a+b=c:d&e~f_g.h-i%2Cj%3Bk')"},
	}
	for _, tt := range tests {
		if got := EntityPath(tt.table, tt.pk, tt.rk); got != tt.want {
			t.Errorf("EntityPath(%q, %q, %q) = %s, want %s", tt.table, tt.pk, tt.rk, got, tt.want)
		}
	}
}

// TestKeyLiteralMatchesPathEscape pins the escaping to url.PathEscape of
// the quote-doubled key, as rest-protocol.md §1.4 describes for .NET.
func TestKeyLiteralMatchesPathEscape(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	check := func(k string) {
		want := "'" + url.PathEscape(strings.ReplaceAll(k, "'", "''")) + "'"
		if got := string(appendKeyLiteral(nil, k)); got != want {
			t.Fatalf("key %q: got %s, want %s", k, got, want)
		}
	}
	for c := range 256 {
		check(string([]byte{byte(c)}))
	}
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		check(string(b))
	}
}

// TestEncoderReadByGoSDK feeds full-metadata output to aztables, which
// parses typed values from the annotations.
func TestEncoderReadByGoSDK(t *testing.T) {
	t.Parallel()
	e := goldenEntity(t)
	e.Properties = append(e.Properties[:3:3], prop("B", vBin(allBytes())), prop("G", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833")))
	for _, f := range []Format{MinimalMetadata, FullMetadata} {
		enc := Encoder{Format: f, ServiceURL: testSvc, Account: "devstoreaccount1", Table: "mytable"}
		var got aztables.EDMEntity
		if err := json.Unmarshal(enc.AppendEntity(nil, &e), &got); err != nil {
			t.Fatal(err)
		}
		if got.PartitionKey != "pk" || got.RowKey != "rk" || got.ETag != e.ETag {
			t.Errorf("%d: keys/etag %q %q %q", f, got.PartitionKey, got.RowKey, got.ETag)
		}
		if v, ok := got.Properties["Big"].(aztables.EDMInt64); !ok || int64(v) != 9007199254740993 {
			t.Errorf("%d: Big = %#v", f, got.Properties["Big"])
		}
		if v, ok := got.Properties["Age"].(int32); !ok || v != 23 {
			t.Errorf("%d: Age = %#v", f, got.Properties["Age"])
		}
		if v, ok := got.Properties["B"].(aztables.EDMBinary); !ok || string(v) != string(allBytes()) {
			t.Errorf("%d: B = %#v", f, got.Properties["B"])
		}
		if v, ok := got.Properties["When"].(aztables.EDMDateTime); !ok || Ticks(timeOf(v)) != e.Properties[2].Value.Int {
			t.Errorf("%d: When = %#v", f, got.Properties["When"])
		}
	}
}

// TestEncodeDecodeRoundTrip: what the encoder writes with metadata, the
// decoder reads back to the same values.
func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	e := Entity{PartitionKey: "p'k", RowKey: "日", Timestamp: MaxDateTime, ETag: "x", Properties: sampleProps()}
	for _, f := range []Format{MinimalMetadata, FullMetadata} {
		enc := Encoder{Format: f, ServiceURL: testSvc, Account: "a", Table: "t"}
		body := enc.AppendEntity(nil, &e)
		eb, err := DecodeEntity(body)
		if err != nil {
			t.Fatalf("%d: %v\n%s", f, err, body)
		}
		if eb.PartitionKey != e.PartitionKey || eb.RowKey != e.RowKey || !sameProps(eb.Properties, e.Properties) {
			t.Errorf("%d:\n got %s\nwant %s", f, showProps(eb.Properties), showProps(e.Properties))
		}
	}
}
