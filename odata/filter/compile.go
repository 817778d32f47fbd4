package filter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pgtables/pgtables/odata"
)

// Schema maps filter names to SQL. The SQL strings are trusted code of the
// caller; they are copied into the output verbatim.
type Schema struct {
	// Strings maps names to the SQL of text COLLATE "C" columns, e.g.
	// {"PartitionKey": "e.pk", "RowKey": "e.rk"} or {"TableName": "t.name"}.
	Strings map[string]string
	// Timestamp is the SQL of the bigint ticks column that "Timestamp"
	// compares against; "" if none.
	Timestamp string
	// Properties is the SQL of the jsonb column holding the stored form of
	// the user properties (see odata/stored.go); "" means that every other
	// name is a missing property.
	Properties string
	// Indexes are the property indexes that the SQL may use (see
	// Index); none when Properties is "".
	Indexes []Index
	// IndexLiterals writes the conditions on Indexes with their property
	// names and type tags as SQL literals, as the indexes' definitions
	// name them, rather than as parameters, so that a plan made before the
	// parameters are known (a generic plan) can match the index's
	// expression and predicate (see Index). The names are the caller's:
	// those of its declared indexes, which the SQL quotes.
	IndexLiterals bool
}

// Index is a property index on the rows: for the entities whose property
// has stored type Type (tag t, name p), the expression
//
//	CASE WHEN props -> p ->> 0 = t THEN <value> END
//
// (value as Compile reads it: text, (props -> p ->> 1)::bigint, ::float8,
// ::boolean or decode(props -> p ->> 1, 'base64')), with text values under
// text_pattern_ops. Compile adds to a comparison that only entities with
// such a type can satisfy a condition on that expression, implied by the
// comparison, so that the planner can use the index without the result
// changing.
type Index struct {
	Property string
	Type     odata.EdmType
}

// Compile returns a SQL boolean expression for e, whose every value is a
// parameter numbered from first ($first, $first+1, ...), and the parameter
// values in order (string, int64, float64, bool or []byte, each cast
// explicitly in the SQL). The expression is self-contained: and/or are
// parenthesized, so it can be combined with other conditions by AND. It
// contains no text of the filter, and no quote characters but those of
// the literals that s.IndexLiterals asks for (the names of s.Indexes).
func Compile(e *Expr, s Schema, first int) (sql string, args []any, err error) {
	if e == nil {
		return "", nil, errors.New("filter: Compile of a nil expression")
	}
	if first < 1 {
		return "", nil, fmt.Errorf("filter: first parameter number %d < 1", first)
	}
	// Sized for a few property comparisons, to spare regrowth.
	c := compiler{s: s, first: first, args: make([]any, 0, 16)}
	c.sb.Grow(1024)
	c.indexes = indexedFamilies(s)
	if err := c.expr(e, 0, OpConst); err != nil {
		return "", nil, err
	}
	return c.sb.String(), c.args, nil
}

// domain is how a comparison compares, after the type rules of §5.2.
type domain uint8

const (
	domMismatch domain = iota // different types: a constant result
	domString                 // stored text, ordinal
	domInteger                // bigint
	domDouble                 // float8 with .NET's NaN order
	domBoolean
	domDateTime // ticks
	domGuid     // lower-case text
	domBinary   // bytea
	nDomains
)

// typeRule is the whole of §5.2's type semantics for one entity: how a
// literal of type lit compares with a value of type stored, and the constant
// result of the comparison when they do not compare (domMismatch); that
// result depends on op only and is returned in every case.
//
// Same types compare by value; an Int32 literal widens to an Int64 value, an
// Int32 or Int64 literal to a Double value; every other pair is a mismatch,
// which Azure resolves by a rank of the types as observed live: eq, gt and
// ge are false, ne, lt and le are true. (A missing property is not a type:
// the callers make it NULL.)
func typeRule(op Op, lit, stored odata.EdmType) (d domain, mismatch bool) {
	mismatch = op == OpNe || op == OpLt || op == OpLe
	switch {
	case lit == stored:
		switch lit {
		case odata.EdmString:
			return domString, mismatch
		case odata.EdmInt32, odata.EdmInt64:
			return domInteger, mismatch
		case odata.EdmDouble:
			return domDouble, mismatch
		case odata.EdmBoolean:
			return domBoolean, mismatch
		case odata.EdmDateTime:
			return domDateTime, mismatch
		case odata.EdmGuid:
			return domGuid, mismatch
		case odata.EdmBinary:
			return domBinary, mismatch
		}
	case lit == odata.EdmInt32 && stored == odata.EdmInt64:
		return domInteger, mismatch
	case (lit == odata.EdmInt32 || lit == odata.EdmInt64) && stored == odata.EdmDouble:
		return domDouble, mismatch
	}
	return domMismatch, mismatch
}

// Fixed values that the SQL needs; they are parameters too, so that the
// SQL text holds no quoted literal at all. Each gets one parameter per
// compilation, shared by all comparisons.
const (
	constBase64 = iota + 1 + int(odata.EdmBinary) // after the type tags 1..8
	constNaN
	nConsts
)

type compiler struct {
	s      Schema
	sb     strings.Builder
	args   []any
	first  int
	consts [nConsts]int // parameter number of a fixed value, 0 until used
	// indexes are the families of stored types indexed per property
	// (indexes.go); nil without indexes.
	indexes map[string]familySet
	// literal is the property whose index condition is being written
	// with literals (Schema.IndexLiterals), "" otherwise.
	literal string
	// ranges is set once an index condition bounds its key other than by
	// equality.
	ranges bool
}

// add appends a parameter value and returns its number.
func (c *compiler) add(v any) int {
	c.args = append(c.args, v)
	return c.first + len(c.args) - 1
}

// ref writes $n::typ.
func (c *compiler) ref(n int, typ string) {
	c.sb.WriteByte('$')
	c.sb.WriteString(strconv.Itoa(n))
	c.sb.WriteString("::")
	c.sb.WriteString(typ)
}

// constRef writes the parameter of fixed value k, adding it on first use.
func (c *compiler) constRef(k int) {
	if c.literal != "" {
		switch {
		case k >= int(odata.EdmString) && k <= int(odata.EdmBinary):
			c.sb.WriteString(QuoteLiteral(odata.EdmType(k).StoredTag()))
			return
		case k == constBase64:
			c.sb.WriteString("'base64'")
			return
		}
	}
	if c.consts[k] == 0 {
		switch {
		case k >= int(odata.EdmString) && k <= int(odata.EdmBinary):
			c.consts[k] = c.add(odata.EdmType(k).StoredTag())
		case k == constBase64:
			c.consts[k] = c.add("base64")
		case k == constNaN:
			c.consts[k] = c.add(math.NaN())
		}
	}
	typ := "text"
	if k == constNaN {
		typ = "float8"
	}
	c.ref(c.consts[k], typ)
}

// expr writes e, whose parent is an expression with operator parent
// (OpConst: none).
func (c *compiler) expr(e *Expr, depth int, parent Op) error {
	if depth > 4*MaxDepth {
		return errors.New("filter: expression nested too deeply")
	}
	switch e.Op {
	case OpAnd, OpOr:
		if len(e.Args) == 0 {
			return fmt.Errorf("filter: %s without operands", e.Op)
		}
		sep := " AND "
		if e.Op == OpOr {
			sep = " OR "
		}
		c.sb.WriteByte('(')
		for i, x := range e.Args {
			if i > 0 {
				c.sb.WriteString(sep)
			}
			if err := c.expr(x, depth+1, e.Op); err != nil {
				return err
			}
		}
		if e.Op == OpAnd {
			c.indexConditions(e.Args)
		}
		c.sb.WriteByte(')')
		return nil
	case OpNot:
		if len(e.Args) != 1 {
			return fmt.Errorf("filter: not with %d operands", len(e.Args))
		}
		x := e.Args[0]
		if x.Op == OpAnd || x.Op == OpOr {
			c.sb.WriteString("NOT ")
			return c.expr(x, depth+1, e.Op)
		}
		c.sb.WriteString("NOT (")
		if err := c.expr(x, depth+1, e.Op); err != nil {
			return err
		}
		c.sb.WriteByte(')')
		return nil
	case OpConst:
		c.sb.WriteString(boolSQL(e.Value.Bool))
		return nil
	}
	if !e.Op.IsComparison() {
		return fmt.Errorf("filter: unknown operator %s", e.Op)
	}
	if e.Value.Type < odata.EdmString || e.Value.Type > odata.EdmBinary {
		return fmt.Errorf("filter: literal of unknown type %d", e.Value.Type)
	}
	if col, ok := c.s.Strings[e.Name]; ok {
		c.column(e, col, odata.EdmString)
		return nil
	}
	if e.Name == "Timestamp" && c.s.Timestamp != "" {
		c.column(e, c.s.Timestamp, odata.EdmDateTime)
		return nil
	}
	if c.s.Properties == "" {
		c.sb.WriteString("NULL::boolean") // a missing property
		return nil
	}
	if parent == OpAnd || parent == OpNot || !c.indexable(e) {
		c.property(e)
		return nil
	}
	// Alone: with the conditions on its index, as in an and of one.
	c.sb.WriteByte('(')
	c.property(e)
	c.indexConditions([]*Expr{e})
	c.sb.WriteByte(')')
	return nil
}

func boolSQL(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

// pinnedTwice reports whether the and e demands that a column equal two
// different literals, in its conjuncts or those of nested ands. PostgreSQL
// folds such a condition to false by itself, and on Citus a statement so
// folded is planned on no shard, where it cannot read the system columns
// the store selects: the store must answer it without a query.
func pinnedTwice(e *Expr, s Schema) bool {
	pinned := map[string]odata.Value{}
	var walk func(x *Expr) bool
	walk = func(x *Expr) bool {
		switch {
		case x.Op == OpAnd:
			for _, a := range x.Args {
				if walk(a) {
					return true
				}
			}
		case x.Op == OpEq:
			_, str := s.Strings[x.Name]
			ts := x.Name == "Timestamp" && s.Timestamp != ""
			if !(str && x.Value.Type == odata.EdmString || ts && x.Value.Type == odata.EdmDateTime) {
				return false
			}
			if v, ok := pinned[x.Name]; ok && (v.Str != x.Value.Str || v.Int != x.Value.Int) {
				return true
			}
			pinned[x.Name] = x.Value
		}
		return false
	}
	return walk(e)
}

// sqlOps are the comparison operators of SQL; textOps compare text byte by
// byte whatever the collation (the operators of text_pattern_ops), which is
// ordinal order for UTF-8, without naming a collation in the SQL.
var (
	sqlOps  = [...]string{OpEq: "=", OpNe: "<>", OpGt: ">", OpGe: ">=", OpLt: "<", OpLe: "<="}
	textOps = [...]string{OpEq: "=", OpNe: "<>", OpGt: "~>~", OpGe: "~>=~", OpLt: "~<~", OpLe: "~<=~"}
)

// column compiles a comparison with a column that always has a value of
// type typ (String: a text COLLATE "C" column; DateTime: bigint ticks). It
// stays a plain "column op $n" predicate that an index can serve.
// Fold reports whether e has the same value for every row of s, and
// which: its constants, and the comparisons of a column with a literal of
// another type, which Compile writes as TRUE or FALSE, combined by and, or
// and not. The store answers a filter that is always false without a
// query: a statement whose condition PostgreSQL folds to false is one that
// Citus plans on no shard, where it cannot read system columns.
func Fold(e *Expr, s Schema) (value, ok bool) {
	switch {
	case e == nil:
		return true, true
	case e.Op == OpConst:
		return e.Value.Bool, true
	case e.Op == OpNot:
		v, ok := Fold(e.Args[0], s)
		return !v, ok
	case e.Op == OpAnd && pinnedTwice(e, s):
		return false, true
	case e.Op == OpAnd || e.Op == OpOr:
		// One false argument makes and false, one true one makes or
		// true; otherwise it is constant when all its arguments are.
		decisive := e.Op == OpOr
		all := true
		for _, a := range e.Args {
			v, ok := Fold(a, s)
			if ok && v == decisive {
				return decisive, true
			}
			all = all && ok
		}
		return !decisive, all
	case e.Op.IsComparison():
		typ := odata.EdmDateTime
		if _, ok := s.Strings[e.Name]; ok {
			typ = odata.EdmString
		} else if e.Name != "Timestamp" || s.Timestamp == "" {
			return false, false
		}
		if d, mismatch := typeRule(e.Op, e.Value.Type, typ); d == domMismatch {
			return mismatch, true
		}
	}
	return false, false
}

func (c *compiler) column(e *Expr, col string, typ odata.EdmType) {
	d, mismatch := typeRule(e.Op, e.Value.Type, typ)
	if d == domMismatch {
		c.sb.WriteString(boolSQL(mismatch))
		return
	}
	c.sb.WriteString(col)
	c.sb.WriteByte(' ')
	c.sb.WriteString(sqlOps[e.Op])
	c.sb.WriteByte(' ')
	if typ == odata.EdmString {
		c.ref(c.add(odata.StoredString(e.Value.Str)), "text")
	} else {
		c.ref(c.add(e.Value.Int), "bigint")
	}
}

// property compiles a comparison with a user property as a CASE on its
// stored type tag:
//
//	CASE props -> $name::text ->> 0
//	  WHEN $tag::text THEN <value comparison>   -- one per comparable type
//	  ...
//	  ELSE CASE WHEN props -> $name::text IS NOT NULL THEN <mismatch> END
//	END
//
// The simple CASE evaluates the tag lookup once; a missing property falls
// to the ELSE and yields NULL, so that it never matches, also under not.
func (c *compiler) property(e *Expr) {
	name := c.add(e.Name)
	var lit [nDomains]int // parameter of the literal per domain, 0 until used
	c.sb.WriteString("CASE ")
	c.lookup(name)
	c.sb.WriteString(" ->> 0")
	var mismatch bool
	for stored := odata.EdmString; stored <= odata.EdmBinary; stored++ {
		var d domain
		d, mismatch = typeRule(e.Op, e.Value.Type, stored)
		if d == domMismatch {
			continue
		}
		c.sb.WriteString(" WHEN ")
		c.constRef(int(stored))
		c.sb.WriteString(" THEN ")
		c.value(e, d, name, &lit)
	}
	c.sb.WriteString(" ELSE CASE WHEN ")
	c.lookup(name)
	c.sb.WriteString(" IS NOT NULL THEN ")
	c.sb.WriteString(boolSQL(mismatch))
	c.sb.WriteString(" END END")
}

// lookup writes the jsonb element of the property whose name is parameter n.
func (c *compiler) lookup(n int) {
	c.sb.WriteString(c.s.Properties)
	c.sb.WriteString(" -> ")
	if c.literal != "" {
		c.sb.WriteString(QuoteLiteral(c.literal))
		return
	}
	c.ref(n, "text")
}

// QuoteLiteral quotes s as a SQL string literal (standard_conforming_strings
// is on since PostgreSQL 9.1). The store's index definitions quote their
// property names and type tags with it, so that the conditions written
// with Schema.IndexLiterals match them to the byte.
func QuoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// storedValue writes the stored value of the property whose name is
// parameter name, as SQL type cast: "" for text, "bytea" decoded from
// base64, else a cast.
func (c *compiler) storedValue(name int, cast string) {
	if cast == "bytea" {
		c.sb.WriteString("decode(")
		c.lookup(name)
		c.sb.WriteString(" ->> 1, ")
		c.constRef(constBase64)
		c.sb.WriteByte(')')
		return
	}
	c.sb.WriteByte('(')
	c.lookup(name)
	c.sb.WriteString(" ->> 1)")
	if cast != "" {
		c.sb.WriteString("::")
		c.sb.WriteString(cast)
	}
}

// value writes the comparison of the stored value with the literal in
// domain d; lit holds the literal's parameters, shared between branches of
// the same domain.
func (c *compiler) value(e *Expr, d domain, name int, lit *[nDomains]int) {
	v := e.Value
	param := func(val any) int {
		if lit[d] == 0 {
			lit[d] = c.add(val)
		}
		return lit[d]
	}
	op := sqlOps[e.Op]
	switch d {
	case domString, domDateTime, domGuid:
		var text string
		switch d {
		case domString:
			text = odata.StoredString(v.Str)
		case domDateTime:
			// Fixed width with seven fractional digits: the stored form,
			// whose text order is time order.
			text = string(odata.AppendDateTime(make([]byte, 0, 28), v.Int, true))
		default:
			text = v.Str
		}
		c.storedValue(name, "")
		c.sb.WriteByte(' ')
		c.sb.WriteString(textOps[e.Op])
		c.sb.WriteByte(' ')
		c.ref(param(text), "text")
	case domInteger:
		c.storedValue(name, "bigint")
		c.sb.WriteByte(' ')
		c.sb.WriteString(op)
		c.sb.WriteByte(' ')
		c.ref(param(v.Int), "bigint")
	case domBoolean:
		c.storedValue(name, "boolean")
		c.sb.WriteByte(' ')
		c.sb.WriteString(op)
		c.sb.WriteByte(' ')
		c.ref(param(v.Bool), "boolean")
	case domBinary:
		c.storedValue(name, "bytea")
		c.sb.WriteByte(' ')
		c.sb.WriteString(op)
		c.sb.WriteByte(' ')
		b := v.Bytes
		if b == nil {
			b = []byte{} // nil would be sent as NULL
		}
		c.ref(param(b), "bytea")
	case domDouble:
		// .NET order (NaN smallest, NaN = NaN) from PostgreSQL's (NaN
		// largest, NaN = NaN): compare (x is not NaN, x) as a row.
		f := v.Float
		if v.Type != odata.EdmDouble {
			f = float64(v.Int) // widening, as .NET converts
		}
		c.sb.WriteByte('(')
		c.storedValue(name, "float8")
		c.sb.WriteString(" <> ")
		c.constRef(constNaN)
		c.sb.WriteString(", ")
		c.storedValue(name, "float8")
		c.sb.WriteString(") ")
		c.sb.WriteString(op)
		c.sb.WriteString(" (")
		if lit[d] == 0 {
			c.add(!math.IsNaN(f))
			lit[d] = c.add(f)
		}
		c.ref(lit[d]-1, "boolean")
		c.sb.WriteString(", ")
		c.ref(lit[d], "float8")
		c.sb.WriteByte(')')
	}
}
