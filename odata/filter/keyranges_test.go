package filter

import "testing"

func TestKeyRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, ranges string
		exact      bool
	}{
		{"PartitionKey eq 'a'", "PartitionKey eq 'a'", true},
		{"'a' le PartitionKey", "'a' le PartitionKey", true},
		{"PartitionKey ge 'a' and PartitionKey lt 'b'", "PartitionKey ge 'a' and PartitionKey lt 'b'", true},
		{"PartitionKey eq 'a' and RowKey ge 'b' and RowKey lt 'c'", "PartitionKey eq 'a' and RowKey ge 'b' and RowKey lt 'c'", true},
		{"RowKey eq 'b' and PartitionKey eq 'a'", "RowKey eq 'b' and PartitionKey eq 'a'", true},
		{"PartitionKey eq 'a' and (RowKey eq 'b' or RowKey eq 'c')", "PartitionKey eq 'a' and (RowKey eq 'b' or RowKey eq 'c')", true},
		{"(PartitionKey eq 'a' and RowKey eq 'b') or (PartitionKey eq 'c' and RowKey eq 'd')", "(PartitionKey eq 'a' and RowKey eq 'b') or (PartitionKey eq 'c' and RowKey eq 'd')", true},
		{"PartitionKey eq 'a' or PartitionKey gt 'x'", "PartitionKey eq 'a' or PartitionKey gt 'x'", true},
		{"PartitionKey eq 5", "PartitionKey eq 5", true},
		{"false", "false", true},

		{"Age gt 3", "", false},
		{"PartitionKey eq 'a' and Age gt 3", "PartitionKey eq 'a'", false},
		{"PartitionKey eq 'a' and RowKey ge 'b' and Age gt 3", "PartitionKey eq 'a' and RowKey ge 'b'", false},
		{"(PartitionKey eq 'a' or PartitionKey eq 'b') and X eq 1", "PartitionKey eq 'a' or PartitionKey eq 'b'", false},
		{"PartitionKey eq 'a' or Age gt 3", "", false},
		// RowKey narrows only within a pinned partition.
		{"RowKey eq 'x'", "", false},
		{"RowKey eq 'x' and Age gt 3", "", false},
		{"PartitionKey ge 'a' and RowKey eq 'x'", "PartitionKey ge 'a'", false},
		{"(PartitionKey eq 'a' or PartitionKey eq 'b') and RowKey eq 'x'", "PartitionKey eq 'a' or PartitionKey eq 'b'", false},
		{"(PartitionKey eq 'a' and RowKey eq 'b') or RowKey eq 'd'", "", false},
		// ne and not are not ranges.
		{"PartitionKey ne 'a'", "", false},
		{"not (RowKey eq 'x') and PartitionKey eq 'a'", "PartitionKey eq 'a'", false},
		{"PartitionKey eq 'a' and RowKey ne 'x'", "PartitionKey eq 'a'", false},
	}
	for _, tt := range tests {
		e, err := Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		ranges, exact := KeyRanges(e, "PartitionKey", "RowKey")
		got := ""
		if ranges != nil {
			got = ranges.String()
		}
		want := ""
		if tt.ranges != "" {
			w, err := Parse(tt.ranges)
			if err != nil {
				t.Fatal(err)
			}
			want = w.String()
		}
		if got != want || exact != tt.exact {
			t.Errorf("KeyRanges(%q) = %q, %v; want %q, %v", tt.in, got, exact, want, tt.exact)
		}
	}
}

func TestPartition(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		filter, pk string
		ok         bool
	}{
		{"PartitionKey eq 'p'", "p", true},
		{"PartitionKey eq 'p' and RowKey gt 'a'", "p", true},
		{"RowKey gt 'a' and (PartitionKey eq 'q') and V eq 1", "q", true},
		{"PartitionKey eq ''", "", true},
		{"PartitionKey eq 'p' or PartitionKey eq 'q'", "", false},
		{"PartitionKey ge 'p'", "", false},
		{"not (PartitionKey eq 'p')", "", false},
		{"PartitionKey eq 1", "", false},
		{"V eq 'p'", "", false},
	} {
		e, err := Parse(tt.filter)
		if err != nil {
			t.Fatal(err)
		}
		if pk, ok := Partition(e, "PartitionKey"); pk != tt.pk || ok != tt.ok {
			t.Errorf("Partition(%s) = %q, %v; want %q, %v", tt.filter, pk, ok, tt.pk, tt.ok)
		}
	}
}
