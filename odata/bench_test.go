package odata

import (
	"fmt"
	"testing"
)

// benchBody is a typical 10-property entity as the Go SDK sends it.
const benchBody = `{"PartitionKey":"customer-00042","RowKey":"order-2024-000123","Name":"Jane Doe",` +
	`"Email":"jane.doe@example.com","Age":42,"Score":97.5,"Active":true,` +
	`"Balance@odata.type":"Edm.Int64","Balance":"123456789012",` +
	`"Created@odata.type":"Edm.DateTime","Created":"2024-01-02T03:04:05.1234567Z",` +
	`"Id@odata.type":"Edm.Guid","Id":"c9da6455-213d-42c9-9a79-3e9149a57833",` +
	`"Avatar@odata.type":"Edm.Binary","Avatar":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",` +
	`"Notes":"Some free text about the order, with a little unicode: café 日本"}`

func benchEntity(b *testing.B) Entity {
	eb, err := DecodeEntity([]byte(benchBody))
	if err != nil {
		b.Fatal(err)
	}
	ts, _ := ParseDateTime("2024-01-02T03:04:06.7654321Z")
	return Entity{PartitionKey: eb.PartitionKey, RowKey: eb.RowKey, Timestamp: ts,
		ETag: `W/"datetime'2024-01-02T03%3A04%3A06.7654321Z'"`, Properties: eb.Properties}
}

func BenchmarkDecodeEntity(b *testing.B) {
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeEntity(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeEntityMinimal(b *testing.B) {
	e := benchEntity(b)
	enc := Encoder{Format: MinimalMetadata, ServiceURL: testSvc, Account: "devstoreaccount1", Table: "orders"}
	buf := enc.AppendEntity(nil, &e)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = enc.AppendEntity(buf[:0], &e)
	}
}

func BenchmarkEncodeEntityFull(b *testing.B) {
	e := benchEntity(b)
	enc := Encoder{Format: FullMetadata, ServiceURL: testSvc, Account: "devstoreaccount1", Table: "orders"}
	buf := enc.AppendEntity(nil, &e)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = enc.AppendEntity(buf[:0], &e)
	}
}

func BenchmarkAppendStored(b *testing.B) {
	e := benchEntity(b)
	buf := AppendStored(nil, e.Properties)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendStored(buf[:0], e.Properties)
	}
}

func BenchmarkDecodeStored(b *testing.B) {
	e := benchEntity(b)
	src := pgStyle(AppendStored(nil, e.Properties))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	var props []Property
	for b.Loop() {
		var err error
		if props, err = DecodeStored(src, props[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeStoredFresh allocates the property slice each time, as a
// reader building a page of new entities does.
func BenchmarkDecodeStoredFresh(b *testing.B) {
	e := benchEntity(b)
	src := pgStyle(AppendStored(nil, e.Properties))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeStored(src, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodePage1000(b *testing.B) {
	e := benchEntity(b)
	page := make([]Entity, 1000)
	for i := range page {
		page[i] = e
		page[i].RowKey = fmt.Sprintf("order-2024-%06d", i)
	}
	enc := Encoder{Format: MinimalMetadata, ServiceURL: testSvc, Account: "devstoreaccount1", Table: "orders"}
	buf := enc.AppendEntities(nil, page)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = enc.AppendEntities(buf[:0], page)
	}
}

// BenchmarkEncodePage1000Stored is the read path as the server runs it:
// entities still in PostgreSQL's text of the stored form, transcoded.
func BenchmarkEncodePage1000Stored(b *testing.B) {
	e := benchEntity(b)
	stored := pgStyle(AppendStored(nil, e.Properties))
	e.Properties = nil
	page := make([]Entity, 1000)
	for i := range page {
		page[i] = e
		page[i].RowKey = fmt.Sprintf("order-2024-%06d", i)
		page[i].Stored = stored
	}
	enc := Encoder{Format: MinimalMetadata, ServiceURL: testSvc, Account: "devstoreaccount1", Table: "orders"}
	buf := enc.AppendEntities(nil, page)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = enc.AppendEntities(buf[:0], page)
	}
}

// TestAllocations guards the allocation counts the hot paths were built
// for (AllocsPerRun cannot run in parallel tests).
func TestAllocations(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts")
	}
	body := []byte(benchBody)
	eb, err := DecodeEntity(body)
	if err != nil {
		t.Fatal(err)
	}
	e := Entity{PartitionKey: eb.PartitionKey, RowKey: eb.RowKey, ETag: "x", Properties: eb.Properties}
	stored := pgStyle(AppendStored(nil, e.Properties))
	buf := make([]byte, 0, 4096)
	enc := Encoder{Format: FullMetadata, ServiceURL: testSvc, Account: "a", Table: "t"}
	tests := []struct {
		name string
		max  float64
		f    func()
	}{
		// EntityBody, its properties, all text, the one Binary value.
		{"DecodeEntity", 4, func() { _, _ = DecodeEntity(body) }},
		// The properties, all text, the Binary value.
		{"DecodeStored", 3, func() { _, _ = DecodeStored(stored, nil) }},
		{"AppendEntity", 0, func() { buf = enc.AppendEntity(buf[:0], &e) }},
		{"AppendStored", 0, func() { buf = AppendStored(buf[:0], e.Properties) }},
		{"ParseGuid", 1, func() { _, _ = ParseGuid("C9DA6455-213D-42C9-9A79-3E9149A57833") }},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(100, tt.f); n > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, n, tt.max)
		}
	}
}

func BenchmarkCheckEntity(b *testing.B) {
	e := benchEntity(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckEntity(e.PartitionKey, e.RowKey, e.Properties); err != nil {
			b.Fatal(err)
		}
	}
}
