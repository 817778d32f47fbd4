package odata

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

var entitySeeds = []string{
	benchBody,
	`{}`,
	`{"PartitionKey":"p","RowKey":"r","a":1,"b":1.5,"c":"x","d":true,"e":null}`,
	`{"a@odata.type":"Edm.Int64","a":"-9223372036854775808","b":"5","b@odata.type":"Edm.Int32"}`,
	`{"d@odata.type":"Edm.Double","d":"NaN","e@odata.type":"Edm.Double","e":"-Infinity","f":-0.0,"g":1e308}`,
	`{"t@odata.type":"Edm.DateTime","t":"1601-01-01T00:00:00Z","u@odata.type":"Edm.DateTime","u":"9999-12-31T23:59:59.9999999Z"}`,
	`{"g@odata.type":"Edm.Guid","g":"{C9DA6455-213D-42C9-9A79-3E9149A57833}","b@odata.type":"Edm.Binary","b":"AAEC/w"}`,
	`{"s":"\u0000\u0001\ud83d\ude00\"\\","odata.etag":"x","Timestamp":{"a":[1]},"x@odata.foo":[]}`,
	`{"a":1,"a":2}`,
	`{"a":"\ud800"}`,
	"{\"a\":\"\xff\"}",
	`{"PartitionKey":1}`,
	`{` + manyMembers(20) + `}`,
}

// FuzzDecodeEntity: the decoder never panics, rejects only with a
// client-facing sentinel, and what it accepts survives the response
// encoder and the stored form unchanged.
func FuzzDecodeEntity(f *testing.F) {
	for _, s := range entitySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		eb, err := DecodeEntity(body)
		if err != nil {
			var de *DetailError
			if !errors.As(err, &de) {
				t.Fatalf("error without detail: %v", err)
			}
			return
		}
		if len(eb.Properties) > maxUserProperties {
			t.Fatalf("%d properties accepted", len(eb.Properties))
		}
		for _, p := range eb.Properties {
			if checkPropertyName([]byte(p.Name)) != nil || p.Name == "PartitionKey" || p.Name == "RowKey" || p.Name == "Timestamp" {
				t.Fatalf("bad name %q accepted", p.Name)
			}
			if !utf8.ValidString(p.Value.Str) {
				t.Fatalf("invalid UTF-8 in %q", p.Name)
			}
			if p.Value.Type == EdmDateTime && !ValidDateTime(p.Value.Int) {
				t.Fatalf("%q: DateTime out of range", p.Name)
			}
		}
		e := Entity{PartitionKey: eb.PartitionKey, RowKey: eb.RowKey, Timestamp: MinDateTime, ETag: "e", Properties: eb.Properties}
		for _, format := range []Format{MinimalMetadata, FullMetadata} {
			enc := Encoder{Format: format, ServiceURL: "http://h/a", Account: "a", Table: "t"}
			out := enc.AppendEntity(nil, &e)
			again, err := DecodeEntity(out)
			if err != nil {
				t.Fatalf("re-decode: %v\n%s", err, out)
			}
			if again.PartitionKey != eb.PartitionKey || again.RowKey != eb.RowKey || !sameProps(again.Properties, eb.Properties) {
				t.Fatalf("format %d:\n got %s\nwant %s", format, showProps(again.Properties), showProps(eb.Properties))
			}
		}
		stored := AppendStored(nil, eb.Properties)
		for _, src := range [][]byte{stored, pgStyle(stored)} {
			back, err := DecodeStored(src, nil)
			if err != nil {
				t.Fatalf("stored: %v\n%s", err, src)
			}
			if !sameProps(back, eb.Properties) {
				t.Fatalf("stored:\n got %s\nwant %s", showProps(back), showProps(eb.Properties))
			}
		}
	})
}

// FuzzDecodeStored: never panics, and what it accepts is a fixed point of
// AppendStored followed by DecodeStored.
func FuzzDecodeStored(f *testing.F) {
	f.Add(pgStyle(AppendStored(nil, sampleProps())))
	f.Add([]byte(`{"A": ["i32", 1], "B": ["str", "x\u0001\u0002"]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"A": ["dt", "2020-01-01T00:00:00Z"], "B": ["guid", "C9DA6455-213D-42C9-9A79-3E9149A57833"]}`))
	f.Add([]byte(`{"A": ["dbl", "NaN"], "B": ["i64", 5], "C": ["bin", "AA=="]}`))
	f.Add([]byte(`{"A": ["bool", true]`))
	f.Add([]byte(`{"00":["str","0\u0001\u0000"]}`)) // once loaded to invalid UTF-8
	f.Fuzz(func(t *testing.T, src []byte) {
		props, err := DecodeStored(src, nil)
		if err != nil {
			if props != nil {
				t.Fatalf("properties returned with error")
			}
			return
		}
		again, err := DecodeStored(AppendStored(nil, props), nil)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !sameProps(again, props) {
			t.Fatalf("\n got %s\nwant %s", showProps(again), showProps(props))
		}
	})
}

// FuzzContinuation: decoding never panics and yields UTF-8, and every
// UTF-8 key survives a round trip.
func FuzzContinuation(f *testing.F) {
	for _, s := range []string{"", "Smith", "mytable2", "日本😀", "a/b?c#d", "ab>", "1!8!U21pdGg-", "1!12!bXl0YWJsZTI-", "U21pdGg=", strings.Repeat("k", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := DecodeContinuation(s); err == nil && !utf8.ValidString(k) {
			t.Fatalf("DecodeContinuation(%q) = %q, not UTF-8", s, k)
		}
		if !utf8.ValidString(s) {
			return
		}
		tok := EncodeContinuation(s)
		k, err := DecodeContinuation(tok)
		if err != nil || k != s {
			t.Fatalf("round trip of %q via %q: %q, %v", s, tok, k, err)
		}
	})
}

// FuzzDateTime: the fast DateTime path agrees with ParseDateTime whenever
// it accepts.
func FuzzDateTime(f *testing.F) {
	for _, s := range []string{"2024-01-02T03:04:05Z", "2024-01-02T03:04:05.1234567Z", "1601-01-01T00:00:00.5Z", "2000-02-29T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseUTCDateTime([]byte(s))
		if !ok {
			return
		}
		if want, ok2 := ParseDateTime(s); !ok2 || got != want {
			t.Fatalf("%q: fast %d, ParseDateTime %d %v", s, got, want, ok2)
		}
	})
}
