package filter

import (
	"regexp"
	"strings"
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

// UsesIndex tells exactly the filters that Compile gives index conditions.
func TestUsesIndex(t *testing.T) {
	t.Parallel()
	s := entitySchema
	s.Indexes = []Index{{Property: "A", Type: odata.EdmInt32}}
	for _, f := range []string{"A eq 1", "A eq 1 or B eq 2", "not (A eq 1)", "A lt 1", "B eq 1", "PartitionKey eq 'p' and (A gt 1 or A eq 1.5)"} {
		e, err := Parse(f)
		if err != nil {
			t.Fatal(err)
		}
		sql, _, err := Compile(e, s, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := UsesIndex(e, s), indexCondition.MatchString(sql); got != want {
			t.Errorf("UsesIndex(%s) = %v, compiled with an index condition: %v", f, got, want)
		}
	}
}

// IndexEqualities tells the filters whose index conditions are equalities
// alone, and IndexLiterals writes those conditions with the index's
// property and type tags as the index's definition does, the compared
// values staying parameters, and the rest of the SQL as without it.
func TestIndexLiterals(t *testing.T) {
	t.Parallel()
	s := entitySchema
	s.Indexes = []Index{{Property: "A", Type: odata.EdmInt32}, {Property: "D", Type: odata.EdmDateTime}, {Property: "Bin", Type: odata.EdmBinary}}
	cases := []struct {
		filter, literal string // literal: in the SQL with IndexLiterals
		eq              bool
	}{
		{"A eq 1", `e.props -> 'A' ->> 0 IN ('i32', 'i64', 'dbl') AND CASE WHEN e.props -> 'A' ->> 0 IN ('i32', 'i64', 'dbl') THEN (e.props -> 'A' ->> 1)::float8 END = $`, true},
		{"A eq 1 or A eq 2", `(e.props -> 'A' ->> 1)::float8 END = $`, true},
		{"A eq 1 and D eq datetime'2026-01-01T00:00:00Z'", `e.props -> 'D' ->> 0 = 'dt' AND CASE WHEN e.props -> 'D' ->> 0 = 'dt' THEN (e.props -> 'D' ->> 1) END = $`, true},
		{"Bin eq X'00'", `decode(e.props -> 'Bin' ->> 1, 'base64') END = $`, true},
		{"A ge 1 and A lt 5", `(e.props -> 'A' ->> 1)::float8 END >= $`, false},
		{"A eq 1 or D gt datetime'2026-01-01T00:00:00Z'", `END ~>~ $`, false},
		{"B eq 1", "", false},
		{"A lt 1", "", false},
	}
	for _, c := range cases {
		e, err := Parse(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := IndexEqualities(e, s); got != c.eq {
			t.Errorf("IndexEqualities(%s) = %v, want %v", c.filter, got, c.eq)
		}
		params, pargs, err := Compile(e, s, 1)
		if err != nil {
			t.Fatal(err)
		}
		ls := s
		ls.IndexLiterals = true
		literals, largs, err := Compile(e, ls, 1)
		if err != nil {
			t.Fatal(err)
		}
		if c.literal == "" {
			if literals != params || len(largs) != len(pargs) {
				t.Errorf("%s: without index conditions, IndexLiterals changed the SQL:\n%s\n%s", c.filter, params, literals)
			}
			continue
		}
		if !strings.Contains(literals, c.literal) {
			t.Errorf("%s: SQL without %s:\n%s", c.filter, c.literal, literals)
		}
		if strings.Count(literals, "'") == 0 || len(largs) >= len(pargs) {
			t.Errorf("%s: %d parameters with literals, %d without:\n%s", c.filter, len(largs), len(pargs), literals)
		}
	}
}
