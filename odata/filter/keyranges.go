package filter

import "github.com/pgtables/pgtables/odata"

// KeyRanges returns the part of e that a primary key on (pk, rk) serves as
// index ranges, and whether that part is all of e.
//
// The part is made of top-level conjuncts of e, so it is a necessary
// condition of e: a scan narrowed by it loses no match. It holds the
// conjuncts that compare pk (with any operator but ne) or combine such
// comparisons with and and or; and, where an eq on pk pins the partition,
// comparisons of rk too, since within one partition they are index ranges
// as well. Not is never taken. It is nil when no conjunct qualifies.
//
// When exact is true, an index scan of the ranges reads matches only. When
// it is false, a scan must evaluate e on every row it reads, narrowed by
// the ranges alone: any other condition in the scan's WHERE (a RowKey eq
// without its PartitionKey, a ne) would have the database read rows without
// bound in search of the few that pass.
func KeyRanges(e *Expr, pk, rk string) (ranges *Expr, exact bool) {
	if e == nil {
		return nil, true
	}
	conj := []*Expr{e}
	if e.Op == OpAnd {
		conj = e.Args
	}
	pinned := pins(conj, pk)
	var keep []*Expr
	exact = true
	for _, c := range conj {
		if isRange(c, pk, rk, pinned) {
			keep = append(keep, c)
		} else {
			exact = false
		}
	}
	switch {
	case exact:
		return e, true
	case len(keep) == 0:
		return nil, false
	case len(keep) == 1:
		return keep[0], false
	}
	return &Expr{Op: OpAnd, Pos: e.Pos, Args: keep}, false
}

// pins reports whether one of the conjuncts is an eq on pk.
func pins(conj []*Expr, pk string) bool {
	for _, c := range conj {
		if c.Op == OpEq && c.Name == pk {
			return true
		}
	}
	return false
}

// isRange reports whether x is index ranges of the key, pk pinned or not.
func isRange(x *Expr, pk, rk string, pinned bool) bool {
	switch {
	case x.Op == OpConst:
		return true
	case x.Op.IsComparison():
		return x.Op != OpNe && (x.Name == pk || pinned && x.Name == rk)
	case x.Op == OpAnd || x.Op == OpOr:
		if x.Op == OpAnd {
			pinned = pinned || pins(x.Args, pk)
		}
		for _, a := range x.Args {
			if !isRange(a, pk, rk, pinned) {
				return false
			}
		}
		return true
	}
	return false
}

// Partition returns the value of pk when e pins one partition: when e, or
// a top-level conjunct of it, is pk eq a string. A query then reads one
// partition, which on Citus lives on one shard.
func Partition(e *Expr, pk string) (string, bool) {
	if e == nil {
		return "", false
	}
	conj := []*Expr{e}
	if e.Op == OpAnd {
		conj = e.Args
	}
	for _, c := range conj {
		if c.Op == OpEq && c.Name == pk && c.Value.Type == odata.EdmString {
			return c.Value.Str, true
		}
	}
	return "", false
}
