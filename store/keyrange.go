package store

import "fmt"

// KeyBound is one end of a KeyRange: a PartitionKey, and optionally a
// RowKey within it.
type KeyBound struct {
	PK    string
	RK    string
	HasRK bool
}

// KeyRange is an inclusive range of entity keys, compared as (PartitionKey,
// RowKey) tuples in ordinal order: the key range of a shared access
// signature. A nil end is unbounded. A bound without a RowKey covers the
// whole partition: Lower {PK: "b"} admits every key of partition "b",
// Upper {PK: "d"} too.
type KeyRange struct {
	Lower *KeyBound
	Upper *KeyBound
}

// Contains reports whether the key (pk, rk) lies in the range. It agrees
// with the SQL that appendSQL produces: Go compares strings bytewise, as
// COLLATE "C" does.
func (r KeyRange) Contains(pk, rk string) bool {
	if b := r.Lower; b != nil {
		if pk < b.PK || (b.HasRK && pk == b.PK && rk < b.RK) {
			return false
		}
	}
	if b := r.Upper; b != nil {
		if pk > b.PK || (b.HasRK && pk == b.PK && rk > b.RK) {
			return false
		}
	}
	return true
}

// The predicates of a key range, as row comparisons that the primary-key
// index serves.
const (
	sqlLowerKey = ` AND (e.pk, e.rk) >= ($%d, $%d)`
	sqlLowerPK  = ` AND e.pk >= $%d`
	sqlUpperKey = ` AND (e.pk, e.rk) <= ($%d, $%d)`
	sqlUpperPK  = ` AND e.pk <= $%d`
)

// appendSQL adds the range's predicates on the entities alias e to a
// query whose arguments so far are args.
func (r KeyRange) appendSQL(sql string, args []any) (string, []any) {
	if b := r.Lower; b != nil {
		if b.HasRK {
			sql += fmt.Sprintf(sqlLowerKey, len(args)+1, len(args)+2)
			args = append(args, b.PK, b.RK)
		} else {
			sql += fmt.Sprintf(sqlLowerPK, len(args)+1)
			args = append(args, b.PK)
		}
	}
	if b := r.Upper; b != nil {
		if b.HasRK {
			sql += fmt.Sprintf(sqlUpperKey, len(args)+1, len(args)+2)
			args = append(args, b.PK, b.RK)
		} else {
			sql += fmt.Sprintf(sqlUpperPK, len(args)+1)
			args = append(args, b.PK)
		}
	}
	return sql, args
}
