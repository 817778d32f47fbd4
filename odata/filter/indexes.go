package filter

import (
	"math"
	"slices"

	"github.com/pgtables/pgtables/odata"
)

// Property indexes (Schema.Indexes) are served by one more condition per
// indexed property, ANDed to the comparisons it derives from: the
// comparisons stay as they are, so their semantics (type rules, NULL for
// a missing property, .NET's NaN order) are untouched, and the condition
// is implied by them, so the result cannot change. In three-valued logic
// too: the condition is false only where a comparison it derives from is
// false, and NULL where the property is missing. It names the index's
// expression and predicate verbatim, which is what lets PostgreSQL match
// them once the parameters are known (a custom plan).
//
// An index holds a family of stored types under one key: the three
// numeric types as float8 (an Int32 literal matches Int32, Int64 and
// Double values alike, so one index must hold all three), every other
// type alone. The key of a numeric family rounds 64-bit integers, so its
// conditions on integers are widened to include equal roundings (>= for
// >, <= for <); the comparisons themselves stay exact.

// family is a set of stored types that one index holds.
type family uint8

const (
	famNone family = iota
	famString
	famNumeric
	famBoolean
	famDateTime
	famGuid
	famBinary
	nFamilies
)

// familySet is a set of families, by bit.
type familySet uint8

// Family returns the family of stored type t: indexes declared on types of
// one family are the same index (the store names them alike).
func Family(t odata.EdmType) int { return int(familyOf(t)) }

func familyOf(t odata.EdmType) family {
	switch t {
	case odata.EdmString:
		return famString
	case odata.EdmInt32, odata.EdmInt64, odata.EdmDouble:
		return famNumeric
	case odata.EdmBoolean:
		return famBoolean
	case odata.EdmDateTime:
		return famDateTime
	case odata.EdmGuid:
		return famGuid
	case odata.EdmBinary:
		return famBinary
	}
	return famNone
}

// numericTags are the stored types of the numeric family, in the order of
// the index's predicate.
var numericTags = [...]odata.EdmType{odata.EdmInt32, odata.EdmInt64, odata.EdmDouble}

func indexedFamilies(s Schema) map[string]familySet {
	if len(s.Indexes) == 0 || s.Properties == "" {
		return nil
	}
	m := make(map[string]familySet, len(s.Indexes))
	for _, ix := range s.Indexes {
		if f := familyOf(ix.Type); f != famNone {
			m[ix.Property] |= 1 << f
		}
	}
	return m
}

// UsesIndex reports whether Compile(e, s, n) adds a condition on one of
// s.Indexes, which the planner can then serve by that index.
func UsesIndex(e *Expr, s Schema) bool {
	c := compiler{s: s, indexes: indexedFamilies(s)}
	return e != nil && c.indexes != nil && c.usesIndex(e, OpConst)
}

// IndexEqualities reports whether Compile(e, s, n) adds conditions on
// s.Indexes and each of them bounds the index's key by equalities alone.
// The plan of such a condition is a walk of the index's entries of one
// value, in key order, whatever the value: a generic plan (see
// Schema.IndexLiterals) is as good for every value. A range's plan is not:
// the index for a narrow one, the primary key for a wide one.
func IndexEqualities(e *Expr, s Schema) bool {
	if !UsesIndex(e, s) {
		return false
	}
	c := compiler{s: s, first: 1, indexes: indexedFamilies(s)}
	if err := c.expr(e, 0, OpConst); err != nil {
		return false
	}
	return !c.ranges
}

func (c *compiler) usesIndex(e *Expr, parent Op) bool {
	switch e.Op {
	case OpAnd, OpOr, OpNot:
		for _, a := range e.Args {
			if c.usesIndex(a, e.Op) {
				return true
			}
		}
		return false
	}
	return parent != OpNot && c.indexable(e)
}

// isProperty reports whether e compares a user property.
func (c *compiler) isProperty(e *Expr) bool {
	if !e.Op.IsComparison() || e.Value.Type < odata.EdmString || e.Value.Type > odata.EdmBinary {
		return false
	}
	if _, ok := c.s.Strings[e.Name]; ok {
		return false
	}
	return !(e.Name == "Timestamp" && c.s.Timestamp != "") && c.s.Properties != ""
}

// indexable reports whether comparison e alone gets an index condition.
func (c *compiler) indexable(e *Expr) bool {
	return c.indexes != nil && c.isProperty(e) && c.leading(e, c.indexes[e.Name])
}

// leading reports whether e can lead an index condition: true only for
// values of types whose families are all indexed, so the condition names
// a type, and a range of the key.
func (c *compiler) leading(e *Expr, indexed familySet) bool {
	if indexed == 0 {
		return false
	}
	switch e.Op {
	case OpEq:
	case OpGt, OpGe:
		// NaN is the least double: gt/ge NaN take every value, NaN too,
		// which no range of PostgreSQL's order (NaN greatest) holds.
		if e.Value.Type == odata.EdmDouble && math.IsNaN(e.Value.Float) {
			return false
		}
	default:
		return false // true for every other type: no type to name
	}
	any := false
	for t := odata.EdmString; t <= odata.EdmBinary; t++ {
		if d, _ := typeRule(e.Op, e.Value.Type, t); d != domMismatch {
			if indexed&(1<<familyOf(t)) == 0 {
				return false
			}
			any = true
		}
	}
	return any
}

// bound is one condition on an index key: key op $param.
type bound struct {
	op  string
	val any
	typ string
}

// arm is one disjunct of an index condition: entities whose stored type
// is one of tags, with the key within bounds.
type arm struct {
	fam    family
	tags   []odata.EdmType
	bounds []bound
}

// indexConditions writes " AND <condition>" for each indexed property
// compared in args, the operands of one and (or a comparison alone).
func (c *compiler) indexConditions(args []*Expr) {
	if c.indexes == nil {
		return
	}
	var done []string
	for _, lead := range args {
		if !c.isProperty(lead) || slices.Contains(done, lead.Name) || !c.leading(lead, c.indexes[lead.Name]) {
			continue
		}
		done = append(done, lead.Name)
		arms := c.arms(lead, args)
		if len(arms) == 0 {
			continue
		}
		name := 0
		if c.s.IndexLiterals {
			c.literal = lead.Name
		} else {
			name = c.add(lead.Name)
		}
		c.sb.WriteString(" AND (")
		for i, a := range arms {
			if i > 0 {
				c.sb.WriteString(" OR ")
			}
			c.writeArm(name, a)
		}
		c.sb.WriteByte(')')
		c.literal = ""
	}
}

// arms are the disjuncts of the condition that lead derives, with the
// bounds of every comparison of the same property among args.
func (c *compiler) arms(lead *Expr, args []*Expr) []arm {
	var arms []arm
	add := func(fam family, tags []odata.EdmType) {
		if len(tags) > 0 {
			arms = append(arms, arm{fam: fam, tags: tags})
		}
	}
	var ints, dbls []odata.EdmType
	for t := odata.EdmString; t <= odata.EdmBinary; t++ {
		if d, _ := typeRule(lead.Op, lead.Value.Type, t); d == domMismatch {
			continue
		}
		switch f := familyOf(t); {
		case t == odata.EdmDouble:
			dbls = append(dbls, t)
		case f == famNumeric:
			ints = append(ints, t)
		default:
			add(f, []odata.EdmType{t})
		}
	}
	add(famNumeric, ints)
	add(famNumeric, dbls)
	noNaN := !(lead.Value.Type == odata.EdmDouble && math.IsNaN(lead.Value.Float))
	for i := range arms {
		for _, e := range args {
			if e.Name != lead.Name || !c.isProperty(e) {
				continue
			}
			if b, ok := armBound(&arms[i], e, noNaN); ok {
				arms[i].bounds = append(arms[i].bounds, b)
			}
		}
	}
	// The integers and the doubles under the same bounds: one arm, one
	// range of the index.
	if len(arms) == 2 && arms[0].fam == famNumeric && arms[1].fam == famNumeric && slices.Equal(arms[0].bounds, arms[1].bounds) {
		arms = []arm{{fam: famNumeric, tags: append(arms[0].tags, arms[1].tags...), bounds: arms[0].bounds}}
	}
	return arms
}

// armBound is the bound on a's key that comparison e implies for the
// entities of a, if any; noNaN says that the lead of a's condition holds
// for no NaN value.
func armBound(a *arm, e *Expr, noNaN bool) (bound, bool) {
	d, _ := typeRule(e.Op, e.Value.Type, a.tags[0])
	for _, t := range a.tags[1:] {
		if dt, _ := typeRule(e.Op, e.Value.Type, t); dt != d {
			return bound{}, false
		}
	}
	if d == domMismatch || e.Op == OpNe {
		return bound{}, false
	}
	v := e.Value
	switch d {
	case domString:
		return bound{textOps[e.Op], odata.StoredString(v.Str), "text"}, true
	case domDateTime:
		return bound{textOps[e.Op], string(odata.AppendDateTime(make([]byte, 0, 28), v.Int, true)), "text"}, true
	case domGuid:
		return bound{textOps[e.Op], v.Str, "text"}, true
	case domBoolean:
		return bound{sqlOps[e.Op], v.Bool, "boolean"}, true
	case domBinary:
		b := v.Bytes
		if b == nil {
			b = []byte{}
		}
		return bound{sqlOps[e.Op], string(b), "bytea"}, true
	case domInteger, domDouble:
		// On a float8 key, always inclusive: rounding an integer keeps
		// order but may make unequal values equal. And NaN, the least
		// double in .NET's order and the greatest in PostgreSQL's, has no
		// range in both: a bound other than eq needs a lead that rules
		// NaN values out, and a literal that is not NaN.
		f := float64(v.Int)
		if v.Type == odata.EdmDouble {
			f = v.Float
		}
		op := map[Op]string{OpEq: "=", OpGt: ">=", OpGe: ">=", OpLt: "<=", OpLe: "<="}[e.Op]
		if e.Op != OpEq && (math.IsNaN(f) || !noNaN) {
			return bound{}, false
		}
		return bound{op, f, "float8"}, true
	}
	return bound{}, false
}

// writeArm writes (<predicate of the index> [AND <tags>] AND <key> op $n ...).
func (c *compiler) writeArm(name int, a arm) {
	c.sb.WriteByte('(')
	c.familyPredicate(name, a.fam)
	if a.fam == famNumeric && len(a.tags) < len(numericTags) {
		c.sb.WriteString(" AND ")
		c.tagIn(name, a.tags)
	}
	for _, b := range a.bounds {
		c.ranges = c.ranges || b.op != "="
		c.sb.WriteString(" AND ")
		c.indexKey(name, a.fam)
		c.sb.WriteByte(' ')
		c.sb.WriteString(b.op)
		c.sb.WriteByte(' ')
		val := b.val
		if b.typ == "bytea" {
			val = []byte(b.val.(string))
		}
		c.ref(c.add(val), b.typ)
	}
	c.sb.WriteByte(')')
}

// familyPredicate writes the predicate of the index of family f: the
// entity's stored type is one of the family.
func (c *compiler) familyPredicate(name int, f family) {
	if f == famNumeric {
		c.tagIn(name, numericTags[:])
		return
	}
	for t := odata.EdmString; t <= odata.EdmBinary; t++ {
		if familyOf(t) == f {
			c.tagIn(name, []odata.EdmType{t})
		}
	}
}

// tagIn writes <property> ->> 0 = $tag, or IN ($tag, ...) for several.
func (c *compiler) tagIn(name int, tags []odata.EdmType) {
	c.lookup(name)
	if len(tags) == 1 {
		c.sb.WriteString(" ->> 0 = ")
		c.constRef(int(tags[0]))
		return
	}
	c.sb.WriteString(" ->> 0 IN (")
	for i, t := range tags {
		if i > 0 {
			c.sb.WriteString(", ")
		}
		c.constRef(int(t))
	}
	c.sb.WriteByte(')')
}

// indexKey writes the key of the index of family f:
// CASE WHEN <predicate> THEN <value> END.
func (c *compiler) indexKey(name int, f family) {
	c.sb.WriteString("CASE WHEN ")
	c.familyPredicate(name, f)
	c.sb.WriteString(" THEN ")
	switch f {
	case famNumeric:
		c.storedValue(name, "float8")
	case famBoolean:
		c.storedValue(name, "boolean")
	case famBinary:
		c.storedValue(name, "bytea")
	default:
		c.storedValue(name, "")
	}
	c.sb.WriteString(" END")
}
