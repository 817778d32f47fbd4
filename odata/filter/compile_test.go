package filter

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/odata"
)

func mustCompile(t *testing.T, filter string, s Schema, first int) (string, []any) {
	t.Helper()
	e, err := Parse(filter)
	if err != nil {
		t.Fatalf("Parse(%q): %v", filter, err)
	}
	sql, args, err := Compile(e, s, first)
	if err != nil {
		t.Fatalf("Compile(%q): %v", filter, err)
	}
	if err := checkSQL(sql, args, first, s); err != nil {
		t.Fatalf("Compile(%q) = %s: %v", filter, sql, err)
	}
	return sql, args
}

// Comparisons of keys and Timestamp must stay plain, sargable column
// predicates.
func TestCompileColumns(t *testing.T) {
	t.Parallel()
	ts := ticks(t, "2020-01-02T03:04:05.1234567Z")
	tests := []struct {
		filter string
		schema Schema
		first  int
		sql    string
		args   []any
	}{
		{`PartitionKey eq 'a' and RowKey ge 'b'`, entitySchema, 1,
			`(e.pk = $1::text AND e.rk >= $2::text)`, []any{"a", "b"}},
		{`PartitionKey eq 'a'`, entitySchema, 3, `e.pk = $3::text`, []any{"a"}},
		{`(PartitionKey eq 'Sales') and (RowKey ge 'S') and (RowKey lt 'T')`, entitySchema, 1,
			`(e.pk = $1::text AND e.rk >= $2::text AND e.rk < $3::text)`, []any{"Sales", "S", "T"}},
		{`PartitionKey eq 'Sales' and (RowKey eq '121' or RowKey eq '322')`, entitySchema, 1,
			`(e.pk = $1::text AND (e.rk = $2::text OR e.rk = $3::text))`, []any{"Sales", "121", "322"}},
		{`'a' le RowKey and 'b' gt RowKey`, entitySchema, 1,
			`(e.rk >= $1::text AND e.rk < $2::text)`, []any{"a", "b"}},
		{`PartitionKey ne 'x' or RowKey le 'y'`, entitySchema, 1,
			`(e.pk <> $1::text OR e.rk <= $2::text)`, []any{"x", "y"}},
		{`not (PartitionKey gt 'x')`, entitySchema, 1, `NOT (e.pk > $1::text)`, []any{"x"}},
		{`not (PartitionKey gt 'x' and RowKey eq 'y')`, entitySchema, 1,
			`NOT (e.pk > $1::text AND e.rk = $2::text)`, []any{"x", "y"}},
		// Strings are passed in their stored form.
		{"PartitionKey eq 'a\x00b\x01'", entitySchema, 1, `e.pk = $1::text`, []any{"a\x01\x01b\x01\x02"}},
		// Other literal types against keys are mismatches: eq/gt/ge false, ne/lt/le true.
		{`PartitionKey eq 5`, entitySchema, 1, `FALSE`, nil},
		{`PartitionKey gt 5L`, entitySchema, 1, `FALSE`, nil},
		{`PartitionKey ge true`, entitySchema, 1, `FALSE`, nil},
		{`PartitionKey ne 5`, entitySchema, 1, `TRUE`, nil},
		{`RowKey lt 1.5`, entitySchema, 1, `TRUE`, nil},
		{`RowKey le X'00'`, entitySchema, 1, `TRUE`, nil},
		{`PartitionKey`, entitySchema, 1, `FALSE`, nil}, // PartitionKey eq true
		{`Timestamp ge datetime'2020-01-02T03:04:05.1234567Z'`, entitySchema, 1, `e.ts >= $1::bigint`, []any{ts}},
		{`datetime'2020-01-02T03:04:05.1234567Z' gt Timestamp`, entitySchema, 1, `e.ts < $1::bigint`, []any{ts}},
		{`Timestamp eq '2020-01-02'`, entitySchema, 1, `FALSE`, nil},
		{`Timestamp ne 5L`, entitySchema, 1, `TRUE`, nil},
		// Query Tables: only TableName exists.
		{`TableName ge 'abc' and TableName lt 'abd'`, tableSchema, 1,
			`(t.name >= $1::text AND t.name < $2::text)`, []any{"abc", "abd"}},
		{`TableName eq 'x' or Other eq 1`, tableSchema, 1, `(t.name = $1::text OR NULL::boolean)`, []any{"x"}},
		{`PartitionKey eq 'a'`, tableSchema, 1, `NULL::boolean`, nil},
		{`Timestamp gt datetime'2020-01-01'`, tableSchema, 1, `NULL::boolean`, nil},
		{`not Flag`, tableSchema, 1, `NOT (NULL::boolean)`, nil},
		// Constants.
		{`true`, entitySchema, 1, `TRUE`, nil},
		{`not false`, entitySchema, 1, `NOT (FALSE)`, nil},
		{`false or PartitionKey eq 'a'`, entitySchema, 1, `(FALSE OR e.pk = $1::text)`, []any{"a"}},
	}
	for _, tt := range tests {
		sql, args := mustCompile(t, tt.filter, tt.schema, tt.first)
		if sql != tt.sql || len(args) != len(tt.args) || len(args) > 0 && !reflect.DeepEqual(args, tt.args) {
			t.Errorf("Compile(%q) =\n  %s %#v\nwant\n  %s %#v", tt.filter, sql, args, tt.sql, tt.args)
		}
	}
}

// The shape of a property comparison, once in full.
func TestCompilePropertyShape(t *testing.T) {
	t.Parallel()
	sql, args := mustCompile(t, `Age gt 30`, entitySchema, 1)
	p := "e.props -> $1::text"
	want := "CASE " + p + " ->> 0" +
		" WHEN $2::text THEN (" + p + " ->> 1)::bigint > $3::bigint" +
		" WHEN $4::text THEN (" + p + " ->> 1)::bigint > $3::bigint" +
		" WHEN $5::text THEN ((" + p + " ->> 1)::float8 <> $6::float8, (" + p + " ->> 1)::float8) > ($7::boolean, $8::float8)" +
		" ELSE CASE WHEN " + p + " IS NOT NULL THEN FALSE END END"
	if sql != want {
		t.Errorf("got\n  %s\nwant\n  %s", sql, want)
	}
	if len(args) != 8 || args[0] != "Age" || args[1] != "i32" || args[2] != int64(30) || args[3] != "i64" ||
		args[4] != "dbl" || !math.IsNaN(args[5].(float64)) || args[6] != true || args[7] != float64(30) {
		t.Errorf("args %#v", args)
	}
}

func TestCompileProperties(t *testing.T) {
	t.Parallel()
	tests := []struct {
		filter string
		has    []string // substrings of the SQL
		args   []any    // arguments that must be present
	}{
		{`Name eq 'x'`, []string{"WHEN $2::text THEN (e.props -> $1::text ->> 1) = $3::text", "THEN FALSE END END"}, []any{"Name", "str", "x"}},
		{`Name ge 'x'`, []string{"~>=~"}, []any{"x"}},
		{`Name gt 'x'`, []string{"~>~"}, nil},
		{`Name lt 'x'`, []string{"~<~", "THEN TRUE END END"}, nil},
		{`Name le 'x'`, []string{"~<=~", "THEN TRUE END END"}, nil},
		{`Name ne 'x'`, []string{"<>", "THEN TRUE END END"}, nil},
		{"Name eq 'a\x00'", nil, []any{"a\x01\x01"}},
		{`Big eq 5L`, []string{"::bigint = ", "::float8) = ("}, []any{"i64", "dbl", int64(5), float64(5)}},
		{`D lt 2.5`, []string{"::float8) < ("}, []any{"dbl", true, 2.5}},
		{`D eq -INF`, nil, []any{math.Inf(-1)}},
		{`Ok eq false`, []string{"::boolean = $3::boolean"}, []any{"bool", false}},
		{`Ok`, []string{"::boolean = $3::boolean"}, []any{"Ok", "bool", true}},
		{`When ge datetime'2020-01-02T03:04:05Z'`, []string{"~>=~ $3::text"}, []any{"dt", "2020-01-02T03:04:05.0000000Z"}},
		{`Id eq guid'C9DA6455-213D-42C9-9A79-3E9149A57833'`, []string{"= $3::text"}, []any{"guid", "c9da6455-213d-42c9-9a79-3e9149a57833"}},
		{`Raw lt X'00FF'`, []string{"decode(e.props -> $1::text ->> 1, $3::text) < $4::bytea"}, []any{"bin", "base64", []byte{0, 0xff}}},
		{`Raw eq X''`, nil, []any{[]byte{}}},
		// The same name in two comparisons; fixed values are shared.
		{`A eq 1 or A eq 2`, []string{"$9::text", "WHEN $2::text", "<> $6::float8"}, []any{"A", "i32", int64(1), int64(2)}},
	}
	for _, tt := range tests {
		sql, args := mustCompile(t, tt.filter, entitySchema, 1)
		for _, h := range tt.has {
			if !strings.Contains(sql, h) {
				t.Errorf("Compile(%q) = %s\n  lacks %q", tt.filter, sql, h)
			}
		}
		for _, a := range tt.args {
			found := false
			for _, got := range args {
				if reflect.DeepEqual(a, got) {
					found = true
				}
			}
			if !found {
				t.Errorf("Compile(%q) args %#v lack %#v", tt.filter, args, a)
			}
		}
	}
}

// The SQL text depends on the filter's shape and literal types, not on its
// values or names, so prepared statements are reused.
func TestCompileSQLIndependentOfValues(t *testing.T) {
	t.Parallel()
	pairs := [][2]string{
		{`A eq 1 and B gt 'x'`, `Other eq 99 and i32 gt 'dbl'`},
		{`D ge 1.5 or not F`, `E ge NaN or not G`},
		{`PartitionKey eq 'a' and RowKey lt 'b'`, `PartitionKey eq 'zz' and RowKey lt ''`},
	}
	for _, p := range pairs {
		a, _ := mustCompile(t, p[0], entitySchema, 1)
		b, _ := mustCompile(t, p[1], entitySchema, 1)
		if a != b {
			t.Errorf("%q and %q compile differently:\n  %s\n  %s", p[0], p[1], a, b)
		}
	}
}

// typeRule against the table of §5.2, written out.
func TestTypeRule(t *testing.T) {
	t.Parallel()
	comparable := map[[2]odata.EdmType]domain{
		{odata.EdmString, odata.EdmString}:     domString,
		{odata.EdmInt32, odata.EdmInt32}:       domInteger,
		{odata.EdmInt32, odata.EdmInt64}:       domInteger,
		{odata.EdmInt32, odata.EdmDouble}:      domDouble,
		{odata.EdmInt64, odata.EdmInt64}:       domInteger,
		{odata.EdmInt64, odata.EdmDouble}:      domDouble,
		{odata.EdmDouble, odata.EdmDouble}:     domDouble,
		{odata.EdmBoolean, odata.EdmBoolean}:   domBoolean,
		{odata.EdmDateTime, odata.EdmDateTime}: domDateTime,
		{odata.EdmGuid, odata.EdmGuid}:         domGuid,
		{odata.EdmBinary, odata.EdmBinary}:     domBinary,
	}
	mismatch := map[Op]bool{OpEq: false, OpGt: false, OpGe: false, OpNe: true, OpLt: true, OpLe: true}
	for lit := odata.EdmString; lit <= odata.EdmBinary; lit++ {
		for stored := odata.EdmString; stored <= odata.EdmBinary; stored++ {
			for op := OpEq; op <= OpLe; op++ {
				d, m := typeRule(op, lit, stored)
				if want := comparable[[2]odata.EdmType{lit, stored}]; d != want {
					t.Errorf("typeRule(%s, %s, %s) domain %d, want %d", op, lit, stored, d, want)
				}
				if m != mismatch[op] {
					t.Errorf("typeRule(%s, %s, %s) mismatch %v", op, lit, stored, m)
				}
			}
		}
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	ok := &Expr{Op: OpConst, Value: odata.Value{Type: odata.EdmBoolean}}
	for _, e := range []*Expr{
		nil,
		{Op: 0},
		{Op: OpAnd},
		{Op: OpNot},
		{Op: OpEq, Name: "A"}, // no literal type
		{Op: OpOr, Args: []*Expr{ok, {Op: 77}}},
	} {
		if sql, _, err := Compile(e, entitySchema, 1); err == nil {
			t.Errorf("Compile(%v) = %s, want an error", e, sql)
		}
	}
	if _, _, err := Compile(ok, entitySchema, 0); err == nil {
		t.Error("Compile with first 0 succeeded")
	}
	// A hand-built binary literal without bytes must not become NULL.
	_, args, err := Compile(&Expr{Op: OpEq, Name: "B", Value: odata.Value{Type: odata.EdmBinary}}, entitySchema, 1)
	if err != nil || checkSQL("", nil, 1, entitySchema) != nil {
		t.Fatal(err)
	}
	if b, ok := args[len(args)-1].([]byte); !ok || b == nil {
		t.Errorf("binary argument %#v", args[len(args)-1])
	}
}

// TestFold: constants, and comparisons of a key column or Timestamp with a
// literal of another type, decide a filter; properties never do, since
// one may be missing.
func TestFold(t *testing.T) {
	t.Parallel()
	s := Schema{Strings: map[string]string{"PartitionKey": "pk", "RowKey": "rk"}, Timestamp: "ts", Properties: "props"}
	for _, tt := range []struct {
		filter      string
		value, cons bool
	}{
		{"false", false, true},
		{"true", true, true},
		{"not true", false, true},
		{"PartitionKey eq 'p' and false", false, true},
		{"false and PartitionKey eq 'p'", false, true},
		{"PartitionKey eq 'p' or false", false, false},
		{"PartitionKey eq 'p' or true", true, true},
		{"false or not true", false, true},
		{"not (PartitionKey eq 'p' and true)", false, false},
		{"not (PartitionKey eq 'p' or true)", false, true},
		{"RowKey eq 1", false, true},
		{"PartitionKey eq 'p1' and RowKey eq 1", false, true},
		{"RowKey eq 1 or PartitionKey eq 'p'", false, false},
		{"Timestamp eq 'x'", false, true},
		{"Timestamp lt datetime'2024-01-01T00:00:00Z'", false, false},
		{"Prop eq 1", false, false},
		{"not (Prop eq 1)", false, false},
		{"PartitionKey eq 'p'", false, false},
		{"PartitionKey eq 'p' and PartitionKey eq 'p'", false, false},
		{"PartitionKey eq 'p1' and PartitionKey eq 'p2'", false, true},
		{"PartitionKey eq 'p1' and (RowKey eq 'r' and PartitionKey eq 'p2')", false, true},
		{"PartitionKey eq 'p' and RowKey eq 'r1' and RowKey eq 'r2'", false, true},
		{"PartitionKey eq 'p1' or PartitionKey eq 'p2'", false, false},
		{"not (PartitionKey eq 'p1' and PartitionKey eq 'p2')", true, true},
		{"(PartitionKey eq 'p1' or RowKey eq 'r') and PartitionKey eq 'p2'", false, false},
		{"Timestamp eq datetime'2024-01-01T00:00:00Z' and Timestamp eq datetime'2024-01-02T00:00:00Z'", false, true},
		{"Prop eq 1 and Prop eq 2", false, false},
	} {
		e, err := Parse(tt.filter)
		if err != nil {
			t.Fatalf("%s: %v", tt.filter, err)
		}
		v, ok := Fold(e, s)
		if ok != tt.cons || ok && v != tt.value {
			t.Errorf("Fold(%s) = %v, %v; want %v, %v", tt.filter, v, ok, tt.value, tt.cons)
		}
	}
}
