package tablecopy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// TableCheck is what a verification found of one table.
type TableCheck struct {
	Table string
	// Counts and digests of each side's entities, in key order, each
	// entity in its canonical form (canonical).
	Source, Dest             int64
	SourceDigest, DestDigest string
	// Differences, the first few: keys missing at the destination, extra
	// there, or with other properties.
	Missing, Extra, Changed []string
	Err                     error
}

// Equal reports whether both sides hold the same entities.
func (c TableCheck) Equal() bool {
	return c.Err == nil && c.Source == c.Dest && c.SourceDigest == c.DestDigest
}

// maxReported bounds the keys a check lists per kind of difference.
const maxReported = 10

// Verify compares tables of src and dst, entity by entity in key order:
// both are read whole, and compared by value and type, whatever the text
// each side writes a value with (5.0 or 5E0, 7 fractional digits or none).
func Verify(ctx context.Context, src, dst Source, tables []string, filter string) []TableCheck {
	checks := make([]TableCheck, len(tables))
	for i, table := range tables {
		checks[i] = verifyTable(ctx, src, dst, table, filter)
	}
	return checks
}

// pager reads a table's entities one at a time.
type pager struct {
	src           Source
	table, filter string
	page          []Entity
	token         string
	done          bool
	n             int64
	digest        hash.Hash
}

func (p *pager) next(ctx context.Context) (*Entity, string, error) {
	for len(p.page) == 0 {
		if p.done {
			return nil, "", nil
		}
		page, next, err := p.src.Page(ctx, p.table, p.filter, p.token)
		if err != nil {
			return nil, "", err
		}
		p.page, p.token, p.done = page, next, next == ""
	}
	e := &p.page[0]
	p.page = p.page[1:]
	c, err := canonical(*e)
	if err != nil {
		return nil, "", fmt.Errorf("%s/%s: %w", e.PartitionKey, e.RowKey, err)
	}
	p.n++
	p.digest.Write([]byte(c))
	p.digest.Write([]byte{'\n'})
	return e, c, nil
}

func verifyTable(ctx context.Context, src, dst Source, table, filter string) TableCheck {
	c := TableCheck{Table: table}
	a := &pager{src: src, table: table, filter: filter, digest: sha256.New()}
	b := &pager{src: dst, table: table, filter: filter, digest: sha256.New()}
	ea, ca, err := a.next(ctx)
	if err == nil {
		var eb *Entity
		var cb string
		eb, cb, err = b.next(ctx)
		for err == nil && (ea != nil || eb != nil) {
			switch cmp := compareKeys(ea, eb); {
			case cmp < 0:
				c.Missing = appendKey(c.Missing, ea)
				ea, ca, err = a.next(ctx)
			case cmp > 0:
				c.Extra = appendKey(c.Extra, eb)
				eb, cb, err = b.next(ctx)
			default:
				if ca != cb {
					c.Changed = appendKey(c.Changed, ea)
				}
				if ea, ca, err = a.next(ctx); err == nil {
					eb, cb, err = b.next(ctx)
				}
			}
		}
	}
	c.Err = err
	c.Source, c.Dest = a.n, b.n
	c.SourceDigest, c.DestDigest = hex.EncodeToString(a.digest.Sum(nil)), hex.EncodeToString(b.digest.Sum(nil))
	return c
}

// compareKeys orders entities by key, a missing one after all others.
func compareKeys(a, b *Entity) int {
	switch {
	case a == nil:
		return 1
	case b == nil:
		return -1
	case a.PartitionKey != b.PartitionKey:
		return strings.Compare(a.PartitionKey, b.PartitionKey)
	}
	return strings.Compare(a.RowKey, b.RowKey)
}

func appendKey(keys []string, e *Entity) []string {
	if len(keys) < maxReported {
		keys = append(keys, strconv.Quote(e.PartitionKey)+"/"+strconv.Quote(e.RowKey))
	}
	return keys
}

// canonical writes an entity so that equal entities write equal text:
// properties by name, each value in one form of its type.
func canonical(e Entity) (string, error) {
	props := append([]Prop(nil), e.Props...)
	sort.Slice(props, func(i, j int) bool { return props[i].Name < props[j].Name })
	var b strings.Builder
	b.WriteString(strconv.Quote(e.PartitionKey) + " " + strconv.Quote(e.RowKey))
	for _, p := range props {
		v, err := canonicalValue(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p.Name, err)
		}
		b.WriteString(" " + strconv.Quote(p.Name) + ":" + p.Type + "=" + v)
	}
	return b.String(), nil
}

func canonicalValue(p Prop) (string, error) {
	var s string
	isString := bytes.HasPrefix(p.Value, []byte(`"`))
	if isString {
		if err := json.Unmarshal(p.Value, &s); err != nil {
			return "", err
		}
	}
	switch p.Type {
	case "Edm.Double":
		if !isString {
			s = string(p.Value)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "", err
		}
		if math.IsNaN(f) {
			return "NaN", nil
		}
		return strconv.FormatUint(math.Float64bits(f), 16), nil
	case "Edm.Int32", "Edm.Int64":
		if !isString {
			s = string(p.Value)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return strconv.FormatInt(n, 10), err
	case "Edm.DateTime":
		t, err := time.Parse(time.RFC3339Nano, s)
		return t.UTC().Format("2006-01-02T15:04:05.0000000Z"), err
	case "Edm.Guid":
		return strings.ToLower(s), nil
	case "Edm.Binary":
		raw, err := base64.StdEncoding.DecodeString(s)
		return base64.StdEncoding.EncodeToString(raw), err
	case "Edm.Boolean":
		return string(p.Value), nil
	}
	return strconv.Quote(s), nil
}
