package filter

import (
	"regexp"
	"testing"

	"github.com/pgtables/pgtables/odata"
)

// indexCondition is how an index condition starts: " AND (", its first
// arm's "(" and the type test of the index's predicate.
var indexCondition = regexp.MustCompile(`AND \(\(e\.props -> \$[0-9]+::text ->> 0 `)

// Which comparisons get a condition on an index: those that only values
// of indexed types can satisfy, and whose index condition is a range.
// (That the conditions change no result is TestDifferential's matter.)
func TestIndexConditions(t *testing.T) {
	t.Parallel()
	numeric := []Index{{Property: "A", Type: odata.EdmInt32}}
	all := []Index{
		{Property: "A", Type: odata.EdmDouble}, {Property: "A", Type: odata.EdmString},
		{Property: "A", Type: odata.EdmDateTime}, {Property: "B", Type: odata.EdmBoolean},
	}
	cases := []struct {
		filter  string
		indexes []Index
		conds   int // index conditions in the SQL
	}{
		{"A eq 1", numeric, 1},
		{"A eq 1", []Index{{Property: "A", Type: odata.EdmString}}, 0},
		{"A eq 1", []Index{{Property: "B", Type: odata.EdmInt32}}, 0},
		{"A eq 1", nil, 0},
		{"A ge 1L and A lt 5L", numeric, 1},
		{"A gt 1.5", numeric, 1},
		{"A ge NaN", numeric, 0},
		{"A eq NaN", numeric, 1},
		{"A lt 5", numeric, 0}, // true for every other type
		{"A ne 5", numeric, 0},
		{"not (A eq 5)", numeric, 0},
		{"A eq 1 or A eq 'x'", all, 2},
		{"A eq 1 and B eq true", all, 2},
		{"A eq 1 and A eq 2", numeric, 1}, // one condition per property and and
		{"PartitionKey eq 'p' and A gt datetime'2026-01-01T00:00:00Z'", all, 1},
		{"A eq X'00'", all, 0},
	}
	for _, c := range cases {
		e, err := Parse(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		s := entitySchema
		s.Indexes = c.indexes
		sql, args, err := Compile(e, s, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkSQL(sql, args, 1, s); err != nil {
			t.Errorf("%s: %v\n%s", c.filter, err, sql)
		}
		if got := len(indexCondition.FindAllString(sql, -1)); got != c.conds {
			t.Errorf("%s with %v: %d index conditions, want %d:\n%s", c.filter, c.indexes, got, c.conds, sql)
		}
	}
}
