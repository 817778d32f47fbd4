package store

import (
	"bytes"
	"testing"
)

// A page's rows share the arena's chunks: each row must keep its own bytes
// whatever comes after it, NULL must stay nil (a row that did not match a
// scan's filter), and appending to a row must not reach the next one.
func TestPropsArenaRowsKeepTheirBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rows [][]byte // nil: NULL
	}{
		{"small rows", [][]byte{[]byte(`{"A":["s","x"]}`), []byte(`{"B":["i32",1]}`), []byte(`{}`)}},
		{"NULL between rows", [][]byte{[]byte(`{"A":["s","x"]}`), nil, []byte(`{"B":["i32",2]}`)}},
		{"rows past a chunk", [][]byte{bytes.Repeat([]byte("a"), 500), bytes.Repeat([]byte("b"), 700), bytes.Repeat([]byte("c"), chunkMax+1), []byte("d")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var a propsArena
			var got [][]byte
			for _, row := range tt.rows {
				// The driver's buffer is reused for the next row.
				src := bytes.Clone(row)
				if err := a.ScanBytes(src); err != nil {
					t.Fatal(err)
				}
				clear(src)
				got = append(got, a.last)
			}
			for i, row := range tt.rows {
				if (row == nil) != (got[i] == nil) || !bytes.Equal(got[i], row) {
					t.Fatalf("row %d: %q, want %q", i, got[i], row)
				}
			}
			for i := range got {
				if got[i] != nil {
					_ = append(got[i], 'X')
				}
			}
			for i, row := range tt.rows {
				if !bytes.Equal(got[i], row) {
					t.Fatalf("after appending to the rows, row %d: %q, want %q", i, got[i], row)
				}
			}
		})
	}
}
