package changefeed

import (
	"encoding/json"
	"errors"
	"testing"
)

// ParsePage takes the contract's pages and refuses what breaks it.
func TestParsePage(t *testing.T) {
	t.Parallel()
	ins := `{"cursor":"c1","op":"insert","txn":"t","PartitionKey":"p","RowKey":"r","Timestamp":"2026-11-27T08:00:00.1234567Z","etag":"W/\"x\"","entity":{"PartitionKey":"p","RowKey":"r"}}`
	del := `{"cursor":"c2","op":"delete","txn":"u","PartitionKey":"p","RowKey":"r","Timestamp":"2026-11-27T08:00:01Z","etag":null,"entity":null}`
	tests := []struct {
		name, body string
		n          int
		ok         bool
	}{
		{"empty", `{"changes":[],"cursor":"c0"}`, 0, true},
		{"insert and delete", `{"changes":[` + ins + `,` + del + `],"cursor":"c2"}`, 2, true},
		{"no cursor", `{"changes":[]}`, 0, false},
		{"empty cursor", `{"changes":[],"cursor":""}`, 0, false},
		{"cursor not the last change's", `{"changes":[` + ins + `],"cursor":"c9"}`, 0, false},
		{"unknown op", `{"changes":[{"cursor":"c1","op":"upsert","txn":"t","entity":{}}],"cursor":"c1"}`, 0, false},
		{"insert without entity", `{"changes":[{"cursor":"c1","op":"insert","txn":"t","entity":null}],"cursor":"c1"}`, 0, false},
		{"delete with entity", `{"changes":[{"cursor":"c1","op":"delete","txn":"t","entity":{}}],"cursor":"c1"}`, 0, false},
		{"no txn", `{"changes":[{"cursor":"c1","op":"delete"}],"cursor":"c1"}`, 0, false},
		{"change without cursor", `{"changes":[{"op":"delete","txn":"t"}],"cursor":"c1"}`, 0, false},
		{"bad time", `{"changes":[{"cursor":"c1","op":"delete","txn":"t","Timestamp":"yesterday"}],"cursor":"c1"}`, 0, false},
		{"not JSON", `<html>`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePage([]byte(tt.body))
			if tt.ok != (err == nil) || err == nil && len(p.Changes) != tt.n {
				t.Fatalf("page %+v, err %v", p, err)
			}
			if err != nil && !errors.Is(err, errPage) {
				t.Errorf("%v is not errPage", err)
			}
		})
	}
	p, _ := ParsePage([]byte(`{"changes":[` + ins + `,` + del + `],"cursor":"c2"}`))
	if c := p.Changes[0]; c.ETag != `W/"x"` || string(c.Raw) != ins || c.Timestamp.Nanosecond() != 123456700 {
		t.Errorf("insert %+v", c)
	}
	if c := p.Changes[1]; c.ETag != "" || c.Entity != nil || string(c.Raw) != del {
		t.Errorf("delete %+v", c)
	}
}

// ParsePage never panics, and what it accepts keeps the contract.
func FuzzParsePage(f *testing.F) {
	f.Add([]byte(`{"changes":[],"cursor":"c0"}`))
	f.Add([]byte(`{"changes":[{"cursor":"c1","op":"insert","txn":"t","PartitionKey":"p","RowKey":"r","Timestamp":"2026-11-27T08:00:00Z","etag":"W/\"x\"","entity":{"A":1}}],"cursor":"c1"}`))
	f.Add([]byte(`{"changes":[{"cursor":"c1","op":"delete","txn":"t","entity":null}],"cursor":"c1"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParsePage(body)
		if err != nil {
			return
		}
		if p.Cursor == "" {
			t.Fatal("accepted without a cursor")
		}
		for i, c := range p.Changes {
			if c.Cursor == "" || c.Txn == "" || (c.Op == OpDelete) != (c.Entity == nil) || !json.Valid(c.Raw) {
				t.Fatalf("change %d accepted: %+v", i, c)
			}
		}
		if n := len(p.Changes); n > 0 && p.Changes[n-1].Cursor != p.Cursor {
			t.Fatal("page cursor is not the last change's")
		}
		for _, txn := range transactions(p.Changes) {
			for _, c := range txn {
				if c.Txn != txn[0].Txn {
					t.Fatal("transactions mixed")
				}
			}
		}
	})
}
