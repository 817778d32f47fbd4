package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/odata"
)

var fuzzSeeds = []string{
	``,
	`PartitionKey eq 'p1' and RowKey ge 'r100' and Age gt 30 and Name ne 'x'`,
	`(PartitionKey eq 'Sales') and (RowKey eq '2')`,
	`PartitionKey eq 'Sales' and (RowKey eq '121' or RowKey eq '322')`,
	`(A eq 1)and(B eq 2)`,
	`not (A eq 1 or B ne 2) and not C`,
	`'a' lt PartitionKey`,
	`IsActive`,
	`not IsActive and X eq 1`,
	`true`,
	`Timestamp ge datetime'2008-07-10T00:00:00Z'`,
	`A eq 'it''s' or A eq ''`,
	`A eq 123 or A eq -5 or A eq 123L or A eq 1.5 or A eq 1e10 or A eq 1.5E-3 or A eq 2d or A eq 2.0D`,
	`A eq NaN or A eq INF or A eq -INF or A eq -0.0`,
	`A eq true or A eq False`,
	`A eq datetime'2008-07-10T00:00:00.1234567+01:00'`,
	`A eq guid'c9da6455-213d-42c9-9a79-3e9149a57833'`,
	`A eq X'0A1B' or A eq binary'' or A eq x'ff'`,
	`A eq 2147483648`,
	`A eq 9223372036854775808L`,
	`A eq 1e400`,
	`A eq datetime'2020-02-30'`,
	`A eq guid'x'`,
	`A eq X'0'`,
	`startswith(Name,'a')`,
	`A add 1 eq 2`,
	`A eq null`,
	`Tags/any(t: t eq 'a')`,
	`A has 'x'`,
	`A eq B`,
	`1 eq 1`,
	`((A eq 1)`,
	`A eq 1)`,
	`A eq 1 B eq 2`,
	`NOT Not and AND eq 1 OR Or`,
	`Ünïcödé eq 'Zoë😀'`,
	"A eq 'a\x00\x01b'",
	"A eq '\xff'",
	strings.Repeat("(", 70) + "A" + strings.Repeat(")", 70),
	strings.Repeat("not ", 70) + "A",
	chain(16, "A# eq #"),
}

// FuzzFilter: Parse and Compile never panic; errors are InvalidInput with a
// position; accepted filters render back to themselves and compile to SQL
// made only of fixed tokens, schema SQL and parameters.
func FuzzFilter(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			if !errors.Is(err, odata.ErrInvalidInput) || !strings.Contains(err.Error(), " at position ") {
				t.Fatalf("Parse(%q): bad error %v", s, err)
			}
			return
		}
		if n, d := shape(e); n > MaxComparisons || d > MaxDepth+1 {
			t.Fatalf("Parse(%q) accepted %d comparisons at depth %d", s, n, d)
		}
		str := e.String()
		back, err := Parse(str)
		if err != nil {
			t.Fatalf("Parse(%q) renders as %q, which fails: %v", s, str, err)
		}
		if back.String() != str {
			t.Fatalf("Parse(%q) renders as %q, which renders as %q", s, str, back.String())
		}
		for _, sc := range []Schema{entitySchema, tableSchema} {
			for _, first := range []int{1, 4} {
				sql, args, err := Compile(e, sc, first)
				if err != nil {
					t.Fatalf("Compile(%q): %v", s, err)
				}
				if err := checkSQL(sql, args, first, sc); err != nil {
					t.Fatalf("Compile(%q) = %s: %v", s, sql, err)
				}
			}
		}
	})
}

// shape returns the number of leaves and the depth of e.
func shape(e *Expr) (leaves, depth int) {
	if len(e.Args) == 0 {
		return 1, 1
	}
	for _, x := range e.Args {
		n, d := shape(x)
		leaves += n
		depth = max(depth, d)
	}
	return leaves, depth + 1
}

func TestFuzzSeeds(t *testing.T) {
	t.Parallel()
	accepted := 0
	for _, s := range fuzzSeeds {
		if _, err := Parse(s); err == nil {
			accepted++
		}
	}
	if accepted < 15 || accepted > len(fuzzSeeds)-15 {
		t.Errorf("seed corpus unbalanced: %d of %d accepted", accepted, len(fuzzSeeds))
	}
}
