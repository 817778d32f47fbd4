package filter

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/odata"
)

func ticks(t *testing.T, s string) int64 {
	t.Helper()
	v, ok := odata.ParseDateTime(s)
	if !ok {
		t.Fatalf("bad test date %q", s)
	}
	return v
}

func sameValue(a, b odata.Value) bool {
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case odata.EdmString, odata.EdmGuid:
		return a.Str == b.Str
	case odata.EdmInt32, odata.EdmInt64, odata.EdmDateTime:
		return a.Int == b.Int
	case odata.EdmDouble:
		return math.Float64bits(a.Float) == math.Float64bits(b.Float) ||
			math.IsNaN(a.Float) && math.IsNaN(b.Float)
	case odata.EdmBoolean:
		return a.Bool == b.Bool
	case odata.EdmBinary:
		return bytes.Equal(a.Bytes, b.Bytes) && (a.Bytes == nil) == (b.Bytes == nil)
	}
	return false
}

func TestParseLiterals(t *testing.T) {
	t.Parallel()
	str := func(s string) odata.Value { return odata.Value{Type: odata.EdmString, Str: s} }
	i32 := func(v int64) odata.Value { return odata.Value{Type: odata.EdmInt32, Int: v} }
	i64 := func(v int64) odata.Value { return odata.Value{Type: odata.EdmInt64, Int: v} }
	dbl := func(v float64) odata.Value { return odata.Value{Type: odata.EdmDouble, Float: v} }
	boolean := func(v bool) odata.Value { return odata.Value{Type: odata.EdmBoolean, Bool: v} }
	dt := func(s string) odata.Value { return odata.Value{Type: odata.EdmDateTime, Int: ticks(t, s)} }
	guid := func(s string) odata.Value { return odata.Value{Type: odata.EdmGuid, Str: s} }
	bin := func(b ...byte) odata.Value {
		if b == nil {
			b = []byte{}
		}
		return odata.Value{Type: odata.EdmBinary, Bytes: b}
	}
	const g = "c9da6455-213d-42c9-9a79-3e9149a57833"
	tests := []struct {
		lit  string
		want odata.Value
	}{
		{`'abc'`, str("abc")},
		{`''`, str("")},
		{`'it''s'`, str("it's")},
		{`''''`, str("'")},
		{`'a''''b'`, str("a''b")},
		{`'''x'''`, str("'x'")},
		{`' spaced  out '`, str(" spaced  out ")},
		{`'Zoë 😀 \u'`, str(`Zoë 😀 \u`)},
		{"'a\x00b\x01'", str("a\x00b\x01")},
		{`'and or not eq'`, str("and or not eq")},
		{`123`, i32(123)},
		{`-5`, i32(-5)},
		{`0`, i32(0)},
		{`-0`, i32(0)},
		{`007`, i32(7)},
		{`2147483647`, i32(math.MaxInt32)},
		{`-2147483648`, i32(math.MinInt32)},
		{`123L`, i64(123)},
		{`123l`, i64(123)},
		{`-1L`, i64(-1)},
		{`2147483648L`, i64(2147483648)},
		{`9223372036854775807L`, i64(math.MaxInt64)},
		{`-9223372036854775808L`, i64(math.MinInt64)},
		{`1.5`, dbl(1.5)},
		{`-2.25`, dbl(-2.25)},
		{`1e10`, dbl(1e10)},
		{`1E10`, dbl(1e10)},
		{`1e+3`, dbl(1000)},
		{`1.5E-3`, dbl(1.5e-3)},
		{`2d`, dbl(2)},
		{`2D`, dbl(2)},
		{`2.0D`, dbl(2)},
		{`2.5d`, dbl(2.5)},
		{`1.5e3d`, dbl(1500)},
		{`-0.0`, dbl(math.Copysign(0, -1))},
		{`1e-400`, dbl(0)},
		{`1.7976931348623157e308`, dbl(math.MaxFloat64)},
		{`4.9e-324`, dbl(5e-324)},
		{`NaN`, dbl(math.NaN())},
		{`nan`, dbl(math.NaN())},
		{`INF`, dbl(math.Inf(1))},
		{`Infinity`, dbl(math.Inf(1))},
		{`-INF`, dbl(math.Inf(-1))},
		{`-Infinity`, dbl(math.Inf(-1))},
		{`-inf`, dbl(math.Inf(-1))},
		{`true`, boolean(true)},
		{`false`, boolean(false)},
		{`True`, boolean(true)},
		{`FALSE`, boolean(false)},
		{`datetime'2008-07-10T00:00:00Z'`, dt("2008-07-10T00:00:00Z")},
		{`DateTime'2008-07-10T00:00:00Z'`, dt("2008-07-10T00:00:00Z")},
		{`DATETIME'2008-07-10T00:00:00.1234567Z'`, dt("2008-07-10T00:00:00.1234567Z")},
		{`datetime'2008-07-10T01:00:00+01:00'`, dt("2008-07-10T00:00:00Z")},
		{`datetime'2008-07-10T00:00:00'`, dt("2008-07-10T00:00:00Z")},
		{`datetime'2008-07-10'`, dt("2008-07-10T00:00:00Z")},
		{`datetime'2008-07-10T12:34'`, dt("2008-07-10T12:34:00Z")},
		{`datetime'0001-01-01T00:00:00Z'`, odata.Value{Type: odata.EdmDateTime, Int: 0}},
		{`datetime'1601-01-01T00:00:00Z'`, odata.Value{Type: odata.EdmDateTime, Int: odata.MinDateTime}},
		{`datetime'9999-12-31T23:59:59.9999999Z'`, odata.Value{Type: odata.EdmDateTime, Int: odata.MaxDateTime}},
		{`guid'` + g + `'`, guid(g)},
		{`GUID'` + strings.ToUpper(g) + `'`, guid(g)},
		{`Guid'{` + g + `}'`, guid(g)},
		{`X'0A1B'`, bin(0x0a, 0x1b)},
		{`x'0a1b'`, bin(0x0a, 0x1b)},
		{`binary'00ff'`, bin(0, 0xff)},
		{`BINARY'00FF'`, bin(0, 0xff)},
		{`X''`, bin()},
		{`binary''`, bin()},
	}
	for _, tt := range tests {
		for _, form := range []string{"Prop eq " + tt.lit, tt.lit + " eq Prop"} {
			e, err := Parse(form)
			if err != nil {
				t.Errorf("Parse(%q): %v", form, err)
				continue
			}
			if e.Op != OpEq || e.Name != "Prop" || !sameValue(e.Value, tt.want) {
				t.Errorf("Parse(%q) = %s %s %#v, want Prop eq %#v", form, e.Name, e.Op, e.Value, tt.want)
			}
			// String renders a literal that reads back the same.
			back, err := Parse(e.String())
			if err != nil || !sameValue(back.Value, e.Value) {
				t.Errorf("round trip of %q via %q: %v %#v", form, e.String(), err, back)
			}
		}
	}
}

func TestParseStructure(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`A eq 1`, `A eq 1`},
		{`  A   eq` + "\t" + `1  `, `A eq 1`},
		{`A eq 1 or B eq 2 and C eq 3`, `A eq 1 or B eq 2 and C eq 3`},
		{`A eq 1 and B eq 2 or C eq 3`, `A eq 1 and B eq 2 or C eq 3`},
		{`A eq 1 and B eq 2 and C eq 3`, `A eq 1 and B eq 2 and C eq 3`},
		{`A eq 1 or B eq 2 or C eq 3`, `A eq 1 or B eq 2 or C eq 3`},
		{`A eq 1 and (B eq 2 and C eq 3)`, `A eq 1 and (B eq 2 and C eq 3)`},
		{`(A eq 1 or B eq 2) and C eq 3`, `(A eq 1 or B eq 2) and C eq 3`},
		{`not A eq 1 and B eq 2`, `not A eq 1 and B eq 2`},
		{`not (A eq 1 and B eq 2)`, `not (A eq 1 and B eq 2)`},
		{`not not A eq 1`, `not not A eq 1`},
		{`(A eq 1 or B eq 2) and C eq 3 and (D eq 4 and E eq 5)`, `(A eq 1 or B eq 2) and C eq 3 and (D eq 4 and E eq 5)`},
		{`A or (B or C)`, `A or (B or C)`},
		{`A and (B or C and D)`, `A and (B or C and D)`},
		{`not(A eq 1)`, `not A eq 1`},
		{`(A eq 1)and(B eq 2)`, `A eq 1 and B eq 2`},
		{`(A eq 1)or(not(B eq 2))`, `A eq 1 or not B eq 2`},
		{`((A eq 1))`, `A eq 1`},
		{`(PartitionKey eq 'Sales') and (RowKey eq '2')`, `PartitionKey eq 'Sales' and RowKey eq '2'`},
		{`PartitionKey eq 'Sales' and (RowKey eq '121' or RowKey eq '322')`, `PartitionKey eq 'Sales' and (RowKey eq '121' or RowKey eq '322')`},
		// Literals on the left flip the operator.
		{`'a' lt PartitionKey`, `PartitionKey gt 'a'`},
		{`'a' le PartitionKey`, `PartitionKey ge 'a'`},
		{`5 gt A`, `A lt 5`},
		{`5 ge A`, `A le 5`},
		{`1 eq A`, `A eq 1`},
		{`1 ne A`, `A ne 1`},
		// Bare Boolean properties and constants.
		{`IsActive`, `IsActive`},
		{`not IsActive`, `not IsActive`},
		{`IsActive and X eq 1`, `IsActive and X eq 1`},
		{`(IsActive)`, `IsActive`},
		{`IsActive eq false`, `IsActive eq false`},
		{`true`, `true`},
		{`not false`, `not false`},
		{`true and A eq 1`, `true and A eq 1`},
		// Keyword case: operators in any case; not when an operand follows.
		{`A EQ 1 AND B Eq 2 OR C ne 3`, `A eq 1 and B eq 2 or C ne 3`},
		{`NOT (A eq 1)`, `not A eq 1`},
		{`Not A`, `not A`},
		{`Not eq 1`, `Not eq 1`},
		{`Not`, `Not`},
		{`Not and NOT`, `Not and NOT`},
		{`And eq 1`, `And eq 1`},
		{`Null eq 5`, `Null eq 5`},
		{`NaN eq 5`, `NaN eq 5`},
		{`A eq True`, `A eq true`},
		{`True eq A`, `A eq true`},
		{`A eq 2.0`, `A eq 2.0`},
		{`A eq 1e21`, `A eq 1E+21`},
		{`Ünïcödé_1 eq 1`, `Ünïcödé_1 eq 1`},
		{`_x eq 1`, `_x eq 1`},
		{`A eq 'x' and B eq X'00'`, `A eq 'x' and B eq X'00'`},
	}
	for _, tt := range tests {
		e, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := e.String(); got != tt.want {
			t.Errorf("Parse(%q) = %s, want %s", tt.in, got, tt.want)
		}
		back, err := Parse(e.String())
		if err != nil || back.String() != e.String() {
			t.Errorf("round trip of %q: %v %v", tt.in, err, back)
		}
	}
}

func TestParsePositions(t *testing.T) {
	t.Parallel()
	e, err := Parse(`  Age gt 30 and 'a' lt PartitionKey`)
	if err != nil {
		t.Fatal(err)
	}
	if e.Op != OpAnd || e.Pos != 2 || len(e.Args) != 2 {
		t.Fatalf("got %+v", e)
	}
	a, b := e.Args[0], e.Args[1]
	if a.Pos != 2 || a.NamePos != 2 || a.ValuePos != 9 {
		t.Errorf("Age gt 30: %+v", a)
	}
	if b.Pos != 16 || b.NamePos != 23 || b.ValuePos != 16 || b.Op != OpGt {
		t.Errorf("'a' lt PartitionKey: %+v", b)
	}
	n, err := Parse(`x or not  Flag`)
	if err != nil {
		t.Fatal(err)
	}
	if not := n.Args[1]; not.Op != OpNot || not.Pos != 5 || not.Args[0].Pos != 10 || !not.Args[0].Bare {
		t.Errorf("not Flag: %+v %+v", not, not.Args[0])
	}
}

func nested(open, atom, close string, n int) string {
	return strings.Repeat(open, n) + atom + strings.Repeat(close, n)
}

func chain(n int, term string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strings.ReplaceAll(term, "#", strconv.Itoa(i))
	}
	return strings.Join(parts, " and ")
}

func TestParseLimitsAccepted(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		chain(MaxComparisons, "A# eq #"),
		nested("(", "A eq 1", ")", MaxDepth),
		nested("not ", "A", "", MaxDepth),
		nested("(not ", "A", ")", MaxDepth/2),
	} {
		if _, err := Parse(in); err != nil {
			t.Errorf("Parse(%.40q...): %v", in, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		pos  int
		want string // part of the message
	}{
		{``, 0, "empty"},
		{`   `, 3, "empty"},
		{"A eq '\xff'", 6, "UTF-8"},
		// Numeric ranges.
		{`Age eq 2147483648`, 7, "Unrecognized 'Edm.Int32' literal '2147483648'"},
		{`Age eq -2147483649`, 7, "Unrecognized 'Edm.Int32' literal '-2147483649'"},
		{`Age eq 99999999999999999999`, 7, "'Edm.Int32'"},
		{`Age eq 9223372036854775808L`, 7, "Unrecognized 'Edm.Int64' literal '9223372036854775808L'"},
		{`Age eq -9223372036854775809L`, 7, "'Edm.Int64'"},
		{`Age eq 1e400`, 7, "Unrecognized 'Edm.Double' literal '1e400'"},
		{`Age eq -1.8e308d`, 7, "'Edm.Double'"},
		// Malformed literals.
		{`A eq 12ab`, 5, "malformed numeric literal '12ab'"},
		{`A eq 1.5.3`, 5, "malformed numeric literal"},
		{`A eq 1.`, 5, "malformed numeric literal"},
		{`A eq 1.5L`, 5, "malformed numeric literal"},
		{`A eq 1e5L`, 5, "malformed numeric literal"},
		{`A eq 3L5`, 5, "malformed numeric literal"},
		{`A eq 1e`, 5, "malformed numeric literal"},
		{`A eq 1.5f`, 5, "malformed numeric literal"},
		{`A eq 1.5M`, 5, "malformed numeric literal"},
		{`A eq 5'x'`, 5, "malformed numeric literal"},
		{`A eq .5`, 5, "unexpected character '.'"},
		{`A eq 1, B eq 2`, 6, "functions are not supported: unexpected ','"},
		{`A eq +5`, 5, "unexpected character '+'"},
		{`A eq 'abc`, 5, "unterminated string"},
		{`A eq 'it''s`, 5, "unterminated string"},
		{`A eq datetime'2020-01-01`, 5, "unterminated datetime"},
		{`A eq datetime'garbage'`, 5, "Unrecognized 'Edm.DateTime' literal"},
		{`A eq datetime'2020-13-01T00:00:00Z'`, 5, "'Edm.DateTime'"},
		{`A eq datetime'2020-02-30T00:00:00Z'`, 5, "'Edm.DateTime'"},
		{`A eq datetime'2020-01-01T25:00:00Z'`, 5, "'Edm.DateTime'"},
		{`A eq datetime''`, 5, "'Edm.DateTime'"},
		{`A eq datetime'0001-01-01T00:00:00+01:00'`, 5, "out of range"},
		{`A eq datetime'9999-12-31T23:59:59-01:00'`, 5, "out of range"},
		{`A eq guid'1234'`, 5, "Unrecognized 'Edm.Guid' literal"},
		{`A eq guid'zzzzzzzz-213d-42c9-9a79-3e9149a57833'`, 5, "'Edm.Guid'"},
		{`A eq X'0'`, 5, "odd number of hex digits"},
		{`A eq X'0A1'`, 5, "odd number of hex digits"},
		{`A eq binary'zz'`, 5, "expected hex digits"},
		{`A eq foo'x'`, 5, "unknown literal prefix 'foo'"},
		{`A eq datetimeoffset'2020-01-01T00:00:00Z'`, 5, "unknown literal prefix"},
		{`A eq "x"`, 5, "single quotes"},
		// Unsupported constructs.
		{`startswith(Name,'a')`, 0, "function 'startswith' is not supported"},
		{`startswith(Name, 'a') eq true`, 0, "function 'startswith'"},
		{`substringof('a', Name)`, 0, "function 'substringof'"},
		{`endswith(Name,'x') eq true`, 0, "function 'endswith'"},
		{`length(Name) eq 3`, 0, "function 'length'"},
		{`tolower(Name) eq 'a'`, 0, "function 'tolower'"},
		{`A eq tolower('X')`, 5, "function 'tolower'"},
		{`A add 1 eq 2`, 2, "arithmetic operator 'add'"},
		{`A eq 1 add 2`, 7, "arithmetic operator 'add'"},
		{`A sub 1 eq 0`, 2, "arithmetic operator 'sub'"},
		{`A mul 2 eq 4`, 2, "arithmetic operator 'mul'"},
		{`A div 2 eq 1`, 2, "arithmetic operator 'div'"},
		{`A mod 2 eq 1`, 2, "arithmetic operator 'mod'"},
		{`(A) ADD 1 eq 2`, 4, "arithmetic operator 'ADD'"},
		{`A eq null`, 5, "null is not supported"},
		{`null eq A`, 0, "null is not supported"},
		{`A eq NULL`, 5, "null is not supported"},
		{`Null eq A`, 0, "null is not supported"},
		{`Tags/any(t: t eq 'a')`, 4, "lambda operators (any, all)"},
		{`Tags/all(t: t eq 'a')`, 4, "lambda operators"},
		{`any(t: t eq 'a')`, 0, "function 'any'"},
		{`A has 'x'`, 2, "operator 'has' is not supported"},
		{`A eq B`, 0, "comparing property 'A' with property 'B'"},
		{`PartitionKey eq RowKey`, 0, "comparing property"},
		{`1 eq 1`, 0, "comparing two literals"},
		{`'a' eq 'b'`, 0, "comparing two literals"},
		{`true eq false`, 0, "comparing two literals"},
		{`True eq NaN`, 0, "comparing two literals"},
		{`-A eq 1`, 0, "negation"},
		// Structure.
		{`(A eq 1`, 0, "missing ')'"},
		{`((A eq 1)`, 0, "missing ')'"},
		{`A eq 1)`, 6, "unbalanced ')'"},
		{`(A eq 1))`, 8, "unbalanced ')'"},
		{`()`, 1, "unbalanced ')'"},
		{`(A eq 1 B eq 2)`, 8, "expected ')' for the '(' at position 0, found 'B'"},
		{`A eq 1 B eq 2`, 7, "expected 'and', 'or' or the end of the filter, found 'B'"},
		{`A eq 1 and`, 10, "found the end of the filter"},
		{`A eq 1 or`, 9, "found the end of the filter"},
		{`and A eq 1`, 0, "found 'and'"},
		{`A eq 1 and or B eq 1`, 11, "found 'or'"},
		{`not`, 3, "found the end of the filter"},
		{`A eq`, 4, "found the end of the filter"},
		{`eq 1`, 0, "found 'eq'"},
		{`A eq not B`, 5, "found 'not'"},
		{`A eq 1 eq 2`, 7, "found 'eq'"},
		{`5`, 1, "comparison operator after the literal at position 0"},
		{`'abc'`, 5, "comparison operator after the literal"},
		{`A eq 'x' 'y'`, 9, "'and', 'or'"},
		// Property names that are not identifiers.
		{`1abc eq 1`, 0, "malformed numeric literal '1abc'"},
		{`My-Prop eq 1`, 2, "negation"},
		{`A.B eq 1`, 1, "unexpected character '.'"},
		{`A$ eq 1`, 1, "unexpected character '$'"},
		{`A eq 1 & B eq 2`, 7, "unexpected character '&'"},
		{"A eq 1\x00", 6, `unexpected character '\x00'`},
		{`[A] eq 1`, 0, "unexpected character '['"},
		// Limits.
		{chain(MaxComparisons+1, "A# eq #"), len(chain(MaxComparisons, "A# eq #")) + 5, "more than 15 comparisons"},
		{chain(MaxComparisons+1, "F#"), len(chain(MaxComparisons, "F#")) + 5, "more than 15 comparisons"},
		{nested("(", "A eq 1", ")", MaxDepth+1), MaxDepth, "nesting deeper than 64"},
		{nested("not ", "A", "", MaxDepth+1), 4 * MaxDepth, "nesting deeper than 64"},
		{nested("(", "A eq 1", ")", 100000), MaxDepth, "nesting deeper"},
		{nested("not (", "A", ")", 100000), MaxDepth / 2 * 5, "nesting deeper"}, // two levels each
	}
	for _, tt := range tests {
		e, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%.60q) = %s, want an error", tt.in, e)
			continue
		}
		if !errors.Is(err, odata.ErrInvalidInput) {
			t.Errorf("Parse(%.60q): %v does not wrap ErrInvalidInput", tt.in, err)
		}
		var de *odata.DetailError
		if !errors.As(err, &de) {
			t.Errorf("Parse(%.60q): %T is not a DetailError", tt.in, err)
			continue
		}
		if !strings.Contains(de.Detail, tt.want) {
			t.Errorf("Parse(%.60q): %q does not mention %q", tt.in, de.Detail, tt.want)
		}
		if pos := " at position " + strconv.Itoa(tt.pos) + "."; !strings.HasSuffix(de.Detail, pos) {
			t.Errorf("Parse(%.60q): %q does not end in %q", tt.in, de.Detail, pos)
		}
	}
}

func TestOpFlip(t *testing.T) {
	t.Parallel()
	for op := OpEq; op <= OpLe; op++ {
		if op.Flip().Flip() != op {
			t.Errorf("%s flips twice to %s", op, op.Flip().Flip())
		}
	}
	if OpAnd.IsComparison() || !OpLe.IsComparison() || Op(99).String() != "Op(99)" {
		t.Error("Op helpers")
	}
}
