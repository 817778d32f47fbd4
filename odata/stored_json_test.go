package odata

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testdb"
)

func TestAppendStoredGolden(t *testing.T) {
	t.Parallel()
	props := []Property{
		prop("S", vStr("a\x00b\x01c\"\n")),
		prop("I", vI32(-7)),
		prop("L", vI64(math.MinInt64)),
		prop("D", vDbl(5)),
		prop("N", vDbl(math.Inf(-1))),
		prop("T", vBool(true)),
		prop("F", vBool(false)),
		prop("W", vDT(MinDateTime)),
		prop("G", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833")),
		prop("B", vBin([]byte{0xfb, 0xff})),
	}
	want := `{"S":["str","a\u0001\u0001b\u0001\u0002c\"\n"],"I":["i32",-7],"L":["i64","-9223372036854775808"],` +
		`"D":["dbl","5.0"],"N":["dbl","-Infinity"],"T":["bool",true],"F":["bool",false],` +
		`"W":["dt","1601-01-01T00:00:00.0000000Z"],"G":["guid","c9da6455-213d-42c9-9a79-3e9149a57833"],"B":["bin","+/8="]}`
	if got := string(AppendStored(nil, props)); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	if got := string(AppendStored(nil, nil)); got != "{}" {
		t.Errorf("empty: %s", got)
	}
	// The string form must be JSON-escape(StoredString(s)).
	for _, s := range []string{"", "x", "\x00", "\x01", "\x00\x01\x02", "a\x00\x00b", "日\x01😀"} {
		got := appendStoredStringBody(nil, s)
		want := appendStringBody(nil, StoredString(s))
		if !bytes.Equal(got, want) {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	}
}

// pgStyle re-formats compact JSON the way PostgreSQL prints jsonb: a space
// after every ':' and ',' outside strings. (Key order does not matter to
// the decoder.)
func pgStyle(b []byte) []byte {
	var out []byte
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		out = append(out, c)
		switch {
		case in && c == '\\':
			i++
			out = append(out, b[i])
		case c == '"':
			in = !in
		case !in && (c == ':' || c == ','):
			out = append(out, ' ')
		}
	}
	return out
}

func TestDecodeStoredRoundTrip(t *testing.T) {
	t.Parallel()
	props := sampleProps()
	stored := AppendStored(nil, props)
	for name, src := range map[string][]byte{"compact": stored, "pg style": pgStyle(stored)} {
		got, err := DecodeStored(src, nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, src)
		}
		if !sameProps(got, props) {
			t.Errorf("%s:\n got %s\nwant %s", name, showProps(got), showProps(props))
		}
	}
}

func TestDecodeStoredAppends(t *testing.T) {
	t.Parallel()
	pre := []Property{prop("X", vI32(1))}
	got, err := DecodeStored([]byte(`{"A": ["i32", 2]}`), pre)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Property{prop("X", vI32(1)), prop("A", vI32(2))}; !sameProps(got, want) {
		t.Errorf("got %s", showProps(got))
	}
	got, err = DecodeStored([]byte(` { } `), pre[:1:1])
	if err != nil || !sameProps(got, pre) {
		t.Errorf("empty: %s %v", showProps(got), err)
	}
}

func TestDecodeStoredManyProperties(t *testing.T) {
	t.Parallel()
	var props []Property
	for i := range 252 {
		props = append(props, prop("p"+strings.Repeat("x", i), vStr(strings.Repeat("v", i%7))))
	}
	got, err := DecodeStored(pgStyle(AppendStored(nil, props)), nil)
	if err != nil || !sameProps(got, props) {
		t.Fatalf("err %v, %d properties", err, len(got))
	}
}

func TestDecodeStoredLenient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      Value
	}{
		{"escaped text", `{"A": ["str", "\u0041\n\u00e9\ud83d\ude00\/"]}`, vStr("A\né😀/")},
		{"loaded", `{"A": ["str", "\u0001\u0001\u0001\u0002x"]}`, vStr("\x00\x01x")},
		{"escaped name", `{"\u0041": ["i32", 1]}`, vI32(1)},
		{"i64 as number", `{"A": ["i64", 12]}`, vI64(12)},
		{"i32 as string", `{"A": ["i32", "12"]}`, vI32(12)},
		{"dbl as number", `{"A": ["dbl", 1.5]}`, vDbl(1.5)},
		{"dt other form", `{"A": ["dt", "1601-01-01T00:00:00Z"]}`, vDT(MinDateTime)},
		{"guid upper", `{"A": ["guid", "C9DA6455-213D-42C9-9A79-3E9149A57833"]}`, vGuid("c9da6455-213d-42c9-9a79-3e9149a57833")},
		{"newlines", "{\n\"A\"\t:\r[ \"bool\" , true ] }", vBool(true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeStored([]byte(tt.src), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !sameValue(got[0].Value, tt.want) {
				t.Errorf("got %s, want %s", showProps(got), showValue(tt.want))
			}
		})
	}
}

func TestDecodeStoredRejects(t *testing.T) {
	t.Parallel()
	tests := []string{
		``, `null`, `[]`, `{`, `{"A"}`, `{"A": 1}`, `{"A": []}`, `{"A": ["i32"]}`, `{"A": ["i32", 1}`,
		`{"A": ["i32", 1], }`, `{"A": ["i32", 1]} x`, `{"A": ["xyz", 1]}`, `{"A": [1, 1]}`,
		`{"A": ["i32", 2147483648]}`, `{"A": ["i32", 1.5]}`, `{"A": ["i32", "x"]}`,
		`{"A": ["i64", "9223372036854775808"]}`, `{"A": ["i64", "1e3"]}`,
		`{"A": ["dbl", "x"]}`, `{"A": ["dbl", "1e400"]}`, `{"A": ["dbl", "inf"]}`, `{"A": ["dbl", true]}`,
		`{"A": ["bool", "true"]}`, `{"A": ["bool", 1]}`, `{"A": ["str", 1]}`, `{"A": ["str", "x", 1]}`,
		`{"A": ["dt", "2020-13-01T00:00:00.0000000Z"]}`, `{"A": ["dt", "2020-02-30T00:00:00.0000000Z"]}`, `{"A": ["dt", 5]}`,
		`{"A": ["guid", "xyz"]}`, `{"A": ["bin", "!!"]}`, `{"A": ["bin", 1]}`,
		"{\"A\": [\"str\", \"\xff\"]}", `{"A": ["str", "\ud800"]}`,
		`{"A": ["str", "0\u0001\u0000"]}`, `{"A": ["str", "\u0001"]}`, `{"A": ["str", "\u0001\u0003"]}`,
	}
	for _, src := range tests {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			pre := []Property{prop("keep", vI32(1))}
			got, err := DecodeStored([]byte(src), pre)
			if err == nil {
				t.Fatalf("accepted: %s", showProps(got))
			}
			if !sameProps(got, pre) {
				t.Errorf("props changed on error: %s", showProps(got))
			}
			if !strings.HasPrefix(err.Error(), "decode stored properties: ") {
				t.Errorf("error %q", err)
			}
		})
	}
}

func TestParseFixedDateTime(t *testing.T) {
	t.Parallel()
	for _, ticks := range []int64{MinDateTime, MaxDateTime, 0, 1, Ticks(time.Date(2000, 2, 29, 12, 0, 0, 100, time.UTC)),
		Ticks(time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC)), Ticks(time.Date(2024, 12, 31, 23, 59, 59, 999999900, time.UTC))} {
		text := AppendDateTime(nil, ticks, true)
		got, ok := parseFixedDateTime(text)
		want, _ := ParseDateTime(string(text))
		if !ok || got != ticks || want != ticks {
			t.Errorf("%s: got %d %v, want %d", text, got, ok, ticks)
		}
	}
	for _, bad := range []string{"2023-02-29T00:00:00.0000000Z", "2020-00-01T00:00:00.0000000Z", "2020-01-01T24:00:00.0000000Z",
		"2020-01-01T00:00:00.000000Z", "2020-01-01T00:00:00.0000000+", "0000-01-01T00:00:00.0000000Z", "2020-01-01 00:00:00.0000000Z"} {
		if _, ok := parseFixedDateTime([]byte(bad)); ok {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestStoredThroughPostgres round-trips the stored form through a real
// PostgreSQL jsonb value, whose text output (spacing, key order, escapes)
// is what DecodeStored reads in production.
func TestStoredThroughPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	props := sampleProps()
	props = append(props,
		prop("AllControls", vStr(func() string {
			var b []byte
			for c := range 0x20 {
				b = append(b, byte(c), 'x')
			}
			return string(b)
		}())),
		prop("Long"+strings.Repeat("n", 200), vStr(strings.Repeat("😀", 16384))),
		prop("Big", vBin(make([]byte, 65536))),
	)
	stored := AppendStored(nil, props)
	var text string
	if err := conn.QueryRow(ctx, "SELECT $1::text::jsonb::text", string(stored)).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, `": ["`) {
		t.Fatalf("unexpected PostgreSQL output: %.200s", text)
	}
	got, err := DecodeStored([]byte(text), nil)
	if err != nil {
		t.Fatal(err)
	}
	// jsonb orders keys; compare by name.
	byName := map[string]Value{}
	for _, p := range got {
		byName[p.Name] = p.Value
	}
	if len(got) != len(props) {
		t.Fatalf("got %d properties, want %d", len(got), len(props))
	}
	for _, p := range props {
		if v, ok := byName[p.Name]; !ok || !sameValue(v, p.Value) {
			t.Errorf("%s: got %s, want %s", p.Name, showValue(v), showValue(p.Value))
		}
	}

	// And the full path: request body -> stored -> jsonb -> response.
	e := Entity{PartitionKey: "p", RowKey: "r", Timestamp: MinDateTime, Properties: props}
	body := (&Encoder{Format: FullMetadata, ServiceURL: testSvc, Account: "a", Table: "t"}).AppendEntity(nil, &e)
	eb, err := DecodeEntity(body)
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := conn.QueryRow(ctx, "SELECT $1::text::jsonb", string(AppendStored(nil, eb.Properties))).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeStored(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(props) {
		t.Fatalf("got %d properties back", len(back))
	}
	for _, p := range back {
		if want, ok := byName[p.Name]; !ok || !sameValue(p.Value, want) {
			t.Errorf("%s: got %s, want %s", p.Name, showValue(p.Value), showValue(want))
		}
	}
}

// TestParseUTCDateTimeMatchesParseDateTime: the fast path agrees with
// ParseDateTime wherever it answers.
func TestParseUTCDateTimeMatchesParseDateTime(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"2024-01-02T03:04:05Z", "2024-01-02T03:04:05.1Z", "2024-01-02T03:04:05.12Z", "2024-01-02T03:04:05.123456Z",
		"2024-01-02T03:04:05.1234567Z", "1601-01-01T00:00:00Z", "9999-12-31T23:59:59.9999999Z", "2000-02-29T23:59:59.5Z",
		"1973-10-04T00:00:00.000000Z", "0001-01-01T00:00:00Z",
	} {
		want, ok := ParseDateTime(s)
		got, ok2 := parseUTCDateTime([]byte(s))
		if !ok || !ok2 || got != want {
			t.Errorf("%s: got %d %v, want %d %v", s, got, ok2, want, ok)
		}
	}
	for _, s := range []string{
		"2024-01-02T03:04:05.Z", "2024-01-02T03:04:05.12345678Z", "2024-01-02T03:04:05", "2024-01-02T03:04Z",
		"2024-01-02T03:04:05+00:00", "2023-02-29T00:00:00Z", "2024-01-02t03:04:05Z", "2024-01-02T03:04:05.1x3Z",
	} {
		if _, ok := parseUTCDateTime([]byte(s)); ok {
			t.Errorf("%s accepted by the fast path", s)
		}
	}
}
