package integration

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// The $filter suites (issue 3) drive queries through the aztables client
// and compare the keys returned, in order, with what a small reference
// model of rest-protocol.md §5.2 computes in the test:
//
//   - a missing property makes a comparison unknown (SQL NULL), so that it
//     never matches, not even under not;
//   - same types compare by value (String ordinally, Double like .NET's
//     CompareTo with NaN smallest and equal to itself, Boolean false < true,
//     DateTime by instant, Guid case-insensitively, Binary byte-wise);
//   - an Int32 literal widens to an Int64 property, an Int32 or Int64
//     literal to a Double property;
//   - any other pair of types is a mismatch: eq, gt and ge are false, ne, lt
//     and le are true;
//   - a literal on the left means the mirrored comparison ('a' lt S is
//     S gt 'a'), mismatches included.
//
// The model is written from the spec, independently of odata/filter.

// fType is an EDM type of the model.
type fType uint8

const (
	fString fType = iota + 1
	fInt32
	fInt64
	fDouble
	fBoolean
	fDateTime
	fGuid
	fBinary
)

// fVal is a typed value: a property of an entity or a literal of a filter.
type fVal struct {
	typ fType
	s   string    // String, Guid (in any case)
	i   int64     // Int32, Int64
	f   float64   // Double
	b   bool      // Boolean
	t   time.Time // DateTime
	x   []byte    // Binary
}

func fStr(s string) fVal              { return fVal{typ: fString, s: s} }
func fI32(i int64) fVal               { return fVal{typ: fInt32, i: i} }
func fI64(i int64) fVal               { return fVal{typ: fInt64, i: i} }
func fDbl(f float64) fVal             { return fVal{typ: fDouble, f: f} }
func fBool(b bool) fVal               { return fVal{typ: fBoolean, b: b} }
func fGuidVal(s string) fVal          { return fVal{typ: fGuid, s: s} }
func fBin(x ...byte) fVal             { return fVal{typ: fBinary, x: append([]byte{}, x...)} }
func fTime(t time.Time) fVal          { return fVal{typ: fDateTime, t: t} }
func fDT(s string) fVal               { return fTime(fParseTime(s)) }
func fNaN() fVal                      { return fDbl(math.NaN()) }
func fInf(sign int) fVal              { return fDbl(math.Inf(sign)) }
func fNegZero() fVal                  { return fDbl(math.Copysign(0, -1)) }
func fLitOf(text string, v fVal) fLit { return fLit{text: text, v: v} }

// fParseTime reads an ISO 8601 date and time; without a zone it is UTC.
func fParseTime(s string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05.9999999", s, time.UTC)
	if err != nil {
		panic(err)
	}
	return t
}

// json adds the property to an entity body in the JSON the SDKs send, with
// an explicit type annotation wherever the JSON value alone would not say
// the type.
func (v fVal) json(m map[string]any, name string) {
	typ := ""
	switch v.typ {
	case fString:
		m[name] = v.s
	case fInt32:
		m[name] = v.i
	case fInt64:
		m[name], typ = strconv.FormatInt(v.i, 10), "Edm.Int64"
	case fDouble:
		typ = "Edm.Double"
		switch {
		case math.IsNaN(v.f):
			m[name] = "NaN"
		case math.IsInf(v.f, 1):
			m[name] = "Infinity"
		case math.IsInf(v.f, -1):
			m[name] = "-Infinity"
		default:
			m[name] = json.Number(strconv.FormatFloat(v.f, 'g', -1, 64))
		}
	case fBoolean:
		m[name] = v.b
	case fDateTime:
		m[name], typ = v.t.UTC().Format("2006-01-02T15:04:05.0000000Z"), "Edm.DateTime"
	case fGuid:
		m[name], typ = v.s, "Edm.Guid"
	case fBinary:
		m[name], typ = base64.StdEncoding.EncodeToString(v.x), "Edm.Binary"
	}
	if typ != "" {
		m[name+"@odata.type"] = typ
	}
}

// fOrder compares a property value with a literal; ok is false for a type
// mismatch.
func fOrder(p, l fVal) (c int, ok bool) {
	switch {
	case p.typ == l.typ:
		switch p.typ {
		case fString:
			return strings.Compare(p.s, l.s), true
		case fInt32, fInt64:
			return cmp.Compare(p.i, l.i), true
		case fDouble:
			// cmp.Compare orders NaN first and equal to itself, and -0
			// equal to 0: .NET's Double.CompareTo.
			return cmp.Compare(p.f, l.f), true
		case fBoolean:
			return cmp.Compare(fB2i(p.b), fB2i(l.b)), true
		case fDateTime:
			return p.t.Compare(l.t), true
		case fGuid:
			return strings.Compare(strings.ToLower(p.s), strings.ToLower(l.s)), true
		case fBinary:
			return bytes.Compare(p.x, l.x), true
		}
	case l.typ == fInt32 && p.typ == fInt64:
		return cmp.Compare(p.i, l.i), true
	case (l.typ == fInt32 || l.typ == fInt64) && p.typ == fDouble:
		return cmp.Compare(p.f, float64(l.i)), true
	}
	return 0, false
}

func fB2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fTri is a truth value of SQL's three-valued logic.
type fTri uint8

const (
	fFalse fTri = iota
	fTrue
	fNull
)

func fTriOf(b bool) fTri {
	if b {
		return fTrue
	}
	return fFalse
}

// fEnt is an entity of the model.
type fEnt struct {
	pk, rk string
	ts     time.Time // Timestamp, as the server set it
	props  map[string]fVal
}

func (e *fEnt) key() string { return e.pk + "|" + e.rk }

func (e *fEnt) get(name string) (fVal, bool) {
	switch name {
	case "PartitionKey":
		return fStr(e.pk), true
	case "RowKey":
		return fStr(e.rk), true
	case "Timestamp":
		return fTime(e.ts), true
	}
	v, ok := e.props[name]
	return v, ok
}

// body is the entity as the JSON an SDK sends.
func (e *fEnt) body() []byte {
	m := map[string]any{"PartitionKey": e.pk, "RowKey": e.rk}
	for name, v := range e.props {
		v.json(m, name)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // the model holds nothing JSON cannot encode
	}
	return b
}

// fLit is a literal as written in a filter and its value.
type fLit struct {
	text string
	v    fVal
}

// fDTLit is a datetime'..' literal; its value is read independently of the
// server's parser.
func fDTLit(body string) fLit { return fLit{text: "datetime'" + body + "'", v: fDT(body)} }

// fx is a filter: its text and its truth value for an entity of the model.
type fx struct {
	text     string
	compound bool // an and or or, which needs parentheses as an operand
	eval     func(e *fEnt) fTri
}

var fFlip = map[string]string{"eq": "eq", "ne": "ne", "gt": "lt", "ge": "le", "lt": "gt", "le": "ge"}

// fCompare is name op lit for one entity.
func fCompare(e *fEnt, name, op string, l fVal) fTri {
	p, ok := e.get(name)
	if !ok {
		return fNull
	}
	c, ok := fOrder(p, l)
	if !ok {
		return fTriOf(op == "ne" || op == "lt" || op == "le")
	}
	switch op {
	case "eq":
		return fTriOf(c == 0)
	case "ne":
		return fTriOf(c != 0)
	case "gt":
		return fTriOf(c > 0)
	case "ge":
		return fTriOf(c >= 0)
	case "lt":
		return fTriOf(c < 0)
	case "le":
		return fTriOf(c <= 0)
	}
	panic("unknown operator " + op)
}

// fCmp is "name op literal".
func fCmp(name, op string, l fLit) fx {
	return fx{text: name + " " + op + " " + l.text,
		eval: func(e *fEnt) fTri { return fCompare(e, name, op, l.v) }}
}

// fCmpL is "literal op name", the literal on the left.
func fCmpL(l fLit, op, name string) fx {
	return fx{text: l.text + " " + op + " " + name,
		eval: func(e *fEnt) fTri { return fCompare(e, name, fFlip[op], l.v) }}
}

// fBare is a bare Boolean property: name eq true.
func fBare(name string) fx {
	return fx{text: name, eval: func(e *fEnt) fTri { return fCompare(e, name, "eq", fBool(true)) }}
}

// fConst is the constant filter true or false.
func fConst(b bool) fx {
	return fx{text: strconv.FormatBool(b), eval: func(*fEnt) fTri { return fTriOf(b) }}
}

func fJoin(op string, xs []fx) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = x.text
		if x.compound {
			parts[i] = "(" + x.text + ")"
		}
	}
	return strings.Join(parts, " "+op+" ")
}

func fAnd(xs ...fx) fx {
	return fx{text: fJoin("and", xs), compound: true, eval: func(e *fEnt) fTri {
		r := fTrue
		for _, x := range xs {
			switch x.eval(e) {
			case fFalse:
				return fFalse
			case fNull:
				r = fNull
			}
		}
		return r
	}}
}

func fOr(xs ...fx) fx {
	return fx{text: fJoin("or", xs), compound: true, eval: func(e *fEnt) fTri {
		r := fFalse
		for _, x := range xs {
			switch x.eval(e) {
			case fTrue:
				return fTrue
			case fNull:
				r = fNull
			}
		}
		return r
	}}
}

// fNot is "not x", with parentheses only where x needs them.
func fNot(x fx) fx {
	text := "not " + x.text
	if x.compound {
		text = "not (" + x.text + ")"
	}
	return fx{text: text, eval: func(e *fEnt) fTri {
		switch v := x.eval(e); v {
		case fNull:
			return fNull
		default:
			return fTriOf(v == fFalse)
		}
	}}
}

// fParen puts x in parentheses.
func fParen(x fx) fx { return fx{text: "(" + x.text + ")", eval: x.eval} }

// fRaw is x written as text (for spellings the builders do not produce).
func fRaw(text string, x fx) fx { return fx{text: text, compound: true, eval: x.eval} }

// want returns the keys of the entities that x matches, in the order the
// service returns them: (PartitionKey, RowKey) ordinal.
func (x fx) want(ents []*fEnt) []string {
	var keys []string
	for _, e := range fSorted(ents) {
		if x.eval(e) == fTrue {
			keys = append(keys, e.key())
		}
	}
	return keys
}

func fSorted(ents []*fEnt) []*fEnt {
	s := slices.Clone(ents)
	slices.SortFunc(s, func(a, b *fEnt) int {
		return cmp.Or(strings.Compare(a.pk, b.pk), strings.Compare(a.rk, b.rk))
	})
	return s
}

// fList pages through a query with the SDK and returns the keys of the
// entities in order and the size of every page; err is the first error.
func fList(c *aztables.Client, opts *aztables.ListEntitiesOptions) (keys []string, pages []int, err error) {
	p := c.NewListEntitiesPager(opts)
	for p.More() {
		page, err := p.NextPage(bg)
		if err != nil {
			return keys, pages, err
		}
		pages = append(pages, len(page.Entities))
		for _, b := range page.Entities {
			var m struct{ PartitionKey, RowKey string }
			if err := json.Unmarshal(b, &m); err != nil {
				return keys, pages, err
			}
			keys = append(keys, m.PartitionKey+"|"+m.RowKey)
		}
		if len(pages) > 100000 {
			return keys, pages, fmt.Errorf("no end to the pages")
		}
	}
	return keys, pages, nil
}

// fCheck runs filter x on c and compares the keys with the model's.
func fCheck(t *testing.T, c *aztables.Client, ents []*fEnt, x fx, top int32) {
	t.Helper()
	opts := &aztables.ListEntitiesOptions{Filter: to.Ptr(x.text)}
	if top > 0 {
		opts.Top = to.Ptr(top)
	}
	got, pages, err := fList(c, opts)
	if err != nil {
		t.Errorf("%s: %v", x.text, err)
		return
	}
	want := x.want(ents)
	if !slices.Equal(got, want) {
		t.Errorf("%s (top %d):\n got  %v\n want %v", x.text, top, got, want)
	}
	for _, n := range pages {
		if top > 0 && n > int(top) {
			t.Errorf("%s: page of %d entities, top %d", x.text, n, top)
		}
	}
}

// fInsert adds the entities to c through the SDK, a few at a time, and
// records the Timestamps the server gave them.
func fInsert(t testing.TB, c *aztables.Client, ents []*fEnt) {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	parallel(len(ents), 8, func(i int) {
		resp, err := c.AddEntity(bg, ents[i].body(), nil)
		if err == nil {
			var m struct{ Timestamp time.Time }
			if err = json.Unmarshal(resp.Value, &m); err == nil && m.Timestamp.IsZero() {
				err = fmt.Errorf("no Timestamp in %s", resp.Value)
			}
			ents[i].ts = m.Timestamp
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("insert %s: %w", ents[i].key(), err))
			mu.Unlock()
		}
	})
	if len(errs) > 0 {
		t.Fatal(errs[0])
	}
}

// Values of every type for the typed entities: extremes, precision edges,
// case and escaping.
var (
	fStrings   = []string{"", "apple", "Apple", "a'b", "5", "banana", "zoë", "Zebra", "apple pie", "ü", "a+b", "50% & #1?", "a\x00b", "\x01", "日本"}
	fInt32s    = []int64{math.MinInt32, -1, 0, 2, 5, 6, math.MaxInt32}
	fInt64s    = []int64{math.MinInt64, -1, 0, 2, 5, 1 << 53, 1<<53 + 1, math.MaxInt64}
	fDoubles   = []fVal{fInf(-1), fDbl(-1.5), fDbl(0), fDbl(2), fDbl(2.5), fDbl(5), fDbl(1000), fDbl(1e300), fInf(1), fNaN(), fDbl(1 << 53), fNegZero()}
	fBools     = []bool{true, false}
	fDateTimes = []string{
		"1601-01-01T00:00:00Z", "2000-01-01T05:00:00Z", "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.1234567Z",
		"2024-01-02T03:04:05.5Z", "2024-01-02T03:04:05.1234568Z", "9999-12-31T23:59:59.9999999Z", "1970-01-01T00:00:00Z",
	}
	fGuids = []string{
		"c9da6455-213d-42c9-9a79-3e9149a57833", "C9DA6455-213D-42C9-9A79-3E9149A57834", "00000000-0000-0000-0000-000000000000",
		"ffffffff-ffff-ffff-ffff-ffffffffffff", "C9DA6455-213D-42C9-9A79-3E9149A57833",
	}
	fBinaries = [][]byte{{}, {0}, {0, 1}, {1}, {0xff}, {0xff, 0}, {0, 0}}
)

// fValueOf returns value number i of a type.
func fValueOf(typ fType, i int) fVal {
	switch typ {
	case fString:
		return fStr(fStrings[i%len(fStrings)])
	case fInt32:
		return fI32(fInt32s[i%len(fInt32s)])
	case fInt64:
		return fI64(fInt64s[i%len(fInt64s)])
	case fDouble:
		return fDoubles[i%len(fDoubles)]
	case fBoolean:
		return fBool(fBools[i%len(fBools)])
	case fDateTime:
		return fDT(fDateTimes[i%len(fDateTimes)])
	case fGuid:
		return fGuidVal(fGuids[i%len(fGuids)])
	case fBinary:
		return fBin(fBinaries[i%len(fBinaries)]...)
	}
	panic(typ)
}

// fTypedEntities are 40 entities in three partitions with one property of
// each type (S I L D B T G X), each missing from some entities, M, whose
// type differs from entity to entity, and two with names that are not
// ASCII letters.
func fTypedEntities() []*fEnt {
	const n = 40
	ents := make([]*fEnt, n)
	for i := range ents {
		e := &fEnt{pk: []string{"a", "b", "c"}[i*3/n], rk: fmt.Sprintf("r%02d", i), props: map[string]fVal{}}
		for _, p := range []struct {
			name    string
			typ     fType
			missing bool
		}{
			{"S", fString, i%7 == 6},
			{"I", fInt32, i%5 == 4},
			{"L", fInt64, i%6 == 5},
			{"D", fDouble, i%4 == 3},
			{"B", fBoolean, i%3 == 2},
			{"T", fDateTime, i%8 == 7},
			{"G", fGuid, i%9 == 8},
			{"X", fBinary, i%5 == 2},
			{"M", fType(i%9 + 1), i%9 == 8},
			{"Größe", fInt32, i%2 == 1},
			{"_u1", fBoolean, i%4 == 0},
		} {
			if p.missing {
				continue
			}
			v := i
			if p.name == "M" {
				v = i / 9
			}
			e.props[p.name] = fValueOf(p.typ, v)
		}
		ents[i] = e
	}
	return ents
}

// fLiterals are literals of every type in every spelling the grammar has.
func fLiterals() []fLit {
	return []fLit{
		fLitOf("'apple'", fStr("apple")), fLitOf("''", fStr("")), fLitOf("'a''b'", fStr("a'b")), fLitOf("'5'", fStr("5")),
		fLitOf("'Zebra'", fStr("Zebra")), fLitOf("'zoë'", fStr("zoë")), fLitOf("'apple pie'", fStr("apple pie")),
		fLitOf("'a+b'", fStr("a+b")), fLitOf("'50% & #1?'", fStr("50% & #1?")), fLitOf("'a\x00b'", fStr("a\x00b")),
		fLitOf("'a\x00'", fStr("a\x00")), fLitOf("'\x01'", fStr("\x01")), fLitOf("'日本'", fStr("日本")),

		fLitOf("5", fI32(5)), fLitOf("-1", fI32(-1)), fLitOf("0", fI32(0)), fLitOf("2", fI32(2)),
		fLitOf("2147483647", fI32(math.MaxInt32)), fLitOf("-2147483648", fI32(math.MinInt32)),

		fLitOf("5L", fI64(5)), fLitOf("0l", fI64(0)), fLitOf("9223372036854775807L", fI64(math.MaxInt64)),
		fLitOf("-9223372036854775808L", fI64(math.MinInt64)), fLitOf("9007199254740993L", fI64(1<<53+1)),
		fLitOf("9007199254740992L", fI64(1<<53)),

		fLitOf("2.0", fDbl(2)), fLitOf("1e3", fDbl(1000)), fLitOf("1E+3", fDbl(1000)), fLitOf("2.5", fDbl(2.5)),
		fLitOf("-1.5", fDbl(-1.5)), fLitOf("5.0", fDbl(5)), fLitOf("2d", fDbl(2)), fLitOf("1e300", fDbl(1e300)),
		fLitOf("-0.0", fNegZero()), fLitOf("1.5e-3", fDbl(0.0015)),

		fLitOf("true", fBool(true)), fLitOf("false", fBool(false)),

		fDTLit("2024-01-02T03:04:05.1234567Z"), fDTLit("2024-01-02T05:04:05.1234567+02:00"), fDTLit("2024-01-02T03:04:05Z"),
		fDTLit("2024-01-02T03:04:05.5"), fDTLit("1999-12-31T23:00:00-06:00"), fDTLit("1000-01-01T00:00:00Z"),
		fLitOf("DateTime'2024-01-02T03:04:05.1234568Z'", fDT("2024-01-02T03:04:05.1234568Z")),

		fLitOf("guid'c9da6455-213d-42c9-9a79-3e9149a57833'", fGuidVal("c9da6455-213d-42c9-9a79-3e9149a57833")),
		fLitOf("guid'C9DA6455-213D-42C9-9A79-3E9149A57834'", fGuidVal("c9da6455-213d-42c9-9a79-3e9149a57834")),
		fLitOf("guid'00000000-0000-0000-0000-000000000000'", fGuidVal("00000000-0000-0000-0000-000000000000")),

		fLitOf("X'0001'", fBin(0, 1)), fLitOf("binary'0001'", fBin(0, 1)), fLitOf("X''", fBin()),
		fLitOf("X'FF'", fBin(0xff)), fLitOf("binary'ff00'", fBin(0xff, 0)), fLitOf("x'01'", fBin(1)), fLitOf("X'00'", fBin(0)),
	}
}

var fOps = []string{"eq", "ne", "gt", "ge", "lt", "le"}

// TestFilterTypes runs every comparison operator with literals of every type
// and spelling against properties of every type, mixed types under one
// name, a property no entity has, and the system properties; half of the
// comparisons have the literal on the left.
func TestFilterTypes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	ents := fTypedEntities()
	fInsert(t, c, ents)

	// Timestamp literals at the instant of an entity's Timestamp, in UTC
	// and with an offset.
	mid := fSorted(ents)[len(ents)/2].ts
	lits := append(fLiterals(),
		fDTLit(mid.UTC().Format("2006-01-02T15:04:05.0000000Z")),
		fDTLit(mid.In(time.FixedZone("", -(3*3600+30*60))).Format("2006-01-02T15:04:05.0000000-07:00")),
	)
	for _, name := range []string{"S", "I", "L", "D", "B", "T", "G", "X", "M", "Nope", "PartitionKey", "RowKey", "Timestamp"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for i, l := range lits {
				for j, op := range fOps {
					x := fCmp(name, op, l)
					if (i+j)%2 == 1 {
						x = fCmpL(l, op, name)
					}
					fCheck(t, c, ents, x, 0)
				}
			}
		})
	}
}

// TestFilterLogic covers and, or, not, parentheses and precedence, bare
// Boolean properties, constants and literals on the left, with missing
// properties under not.
func TestFilterLogic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	ents := fTypedEntities()
	fInsert(t, c, ents)

	var (
		apple   = fLitOf("'apple'", fStr("apple"))
		empty   = fLitOf("''", fStr(""))
		five    = fLitOf("5", fI32(5))
		zero    = fLitOf("0", fI32(0))
		fiveL   = fLitOf("5L", fI64(5))
		fiveD   = fLitOf("5.0", fDbl(5))
		emptyX  = fLitOf("X''", fBin())
		tru     = fLitOf("true", fBool(true))
		sApple  = fCmp("S", "eq", apple)
		iGt0    = fCmp("I", "gt", zero)
		iEq5    = fCmp("I", "eq", five)
		bBare   = fBare("B")
		missing = fCmp("Nope", "eq", five)
	)
	fifteen := make([]fx, 15)
	for i := range fifteen {
		fifteen[i] = fCmp("I", "eq", fLitOf(strconv.Itoa(i-7), fI32(int64(i-7))))
	}
	for _, x := range []fx{
		fAnd(iGt0, fCmp("S", "ne", empty)),
		fAnd(iGt0, fCmp("S", "ne", empty), fCmp("PartitionKey", "eq", fLitOf("'b'", fStr("b")))),
		fOr(iEq5, fCmp("L", "eq", fiveL), fCmp("D", "eq", fiveD)),
		fOr(iEq5, fCmp("L", "eq", five), fCmp("D", "eq", five), fCmp("M", "eq", five)),
		fNot(sApple),
		fNot(fParen(sApple)),
		fNot(fNot(sApple)),
		fNot(fNot(fNot(fParen(fCmp("S", "lt", apple))))),
		fNot(missing),
		fNot(fCmp("Nope", "ne", five)),
		fNot(fCmp("M", "eq", five)),
		fNot(fCmp("M", "lt", five)),
		fOr(fNot(sApple), iEq5),
		fOr(missing, iEq5),
		fAnd(fNot(missing), iEq5),
		fNot(fOr(missing, iEq5)),
		fNot(fAnd(missing, iEq5)),
		fNot(fOr(sApple, iGt0)),
		fNot(fAnd(sApple, iGt0)),
		fAnd(fNot(iGt0), bBare),
		bBare,
		fNot(bBare),
		fParen(bBare),
		fBare("M"),
		fNot(fBare("M")),
		fBare("S"),
		fNot(fBare("S")),
		fBare("Nope"),
		fNot(fBare("Nope")),
		fAnd(bBare, fCmp("I", "ge", zero)),
		fAnd(fCmp("I", "ge", zero), bBare),
		fOr(bBare, fCmp("X", "eq", emptyX)),
		fCmpL(tru, "eq", "B"),
		fCmpL(fLitOf("false", fBool(false)), "lt", "B"),
		fAnd(fCmpL(five, "lt", "I"), fCmpL(fLitOf("'b'", fStr("b")), "ge", "PartitionKey")),
		fRaw("S eq 'apple' or I gt 0 and B", fOr(sApple, fAnd(iGt0, bBare))),
		fRaw("(S eq 'apple' or I gt 0) and B", fAnd(fOr(sApple, iGt0), bBare)),
		fRaw("B and I gt 0 or S eq 'apple'", fOr(fAnd(bBare, iGt0), sApple)),
		fRaw("not B or B", fOr(fNot(bBare), bBare)),
		fRaw("not (B or I eq 5)", fNot(fOr(bBare, iEq5))),
		fRaw("not B and not I eq 5", fAnd(fNot(bBare), fNot(iEq5))),
		fRaw("((I eq 5))", iEq5),
		fRaw("(I eq 5)or(B)", fOr(iEq5, bBare)),
		fRaw("  I  eq  5  ", iEq5),
		fRaw("I EQ 5 OR B", fOr(iEq5, bBare)),
		fConst(true),
		fConst(false),
		fAnd(fConst(true), iEq5),
		fOr(fConst(false), iEq5),
		fNot(fConst(false)),
		fOr(fConst(true), missing),
		fAnd(fCmp("Timestamp", "ge", fDTLit(fSorted(ents)[0].ts.Add(-time.Second).UTC().Format(time.RFC3339Nano))),
			fCmp("Timestamp", "le", fDTLit(fSorted(ents)[0].ts.Add(time.Hour).UTC().Format(time.RFC3339Nano)))),
		fOr(fifteen...),
		fAnd(fCmp("Größe", "ge", zero), fNot(fBare("_u1"))),
		fOr(fCmp("Größe", "lt", fLitOf("'x'", fStr("x"))), fBare("_u1")),
	} {
		fCheck(t, c, ents, x, 0)
		fCheck(t, c, ents, x, 3)
	}
}

// TestFilterSelectTop combines filters with $select and $top.
func TestFilterSelectTop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	ents := fTypedEntities()
	fInsert(t, c, ents)
	byRK := map[string]*fEnt{}
	for _, x := range ents {
		byRK[x.rk] = x
	}

	for _, tc := range []struct {
		filter fx
		sel    string
		top    int32
		want   []string // members of every entity besides odata.etag
	}{
		{fCmp("I", "ge", fLitOf("0", fI32(0))), "I,RowKey", 3, []string{"I", "RowKey"}},
		{fCmp("I", "ge", fLitOf("0", fI32(0))), "RowKey, I", 1000, []string{"I", "RowKey"}},
		{fCmp("PartitionKey", "eq", fLitOf("'b'", fStr("b"))), "RowKey,Nope", 2, []string{"Nope", "RowKey"}},
		{fAnd(fCmp("PartitionKey", "ge", fLitOf("'b'", fStr("b"))), fBare("B")), "RowKey,S,B", 1, []string{"B", "RowKey", "S"}},
	} {
		var rks []string
		pages := 0
		p := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: to.Ptr(tc.filter.text), Select: to.Ptr(tc.sel), Top: to.Ptr(tc.top)})
		for p.More() {
			page, err := p.NextPage(bg)
			if err != nil {
				t.Fatalf("%s: %v", tc.filter.text, err)
			}
			pages++
			if len(page.Entities) > int(tc.top) {
				t.Errorf("%s: page of %d, top %d", tc.filter.text, len(page.Entities), tc.top)
			}
			for _, b := range page.Entities {
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				rk, _ := m["RowKey"].(string)
				rks = append(rks, rk)
				delete(m, "odata.etag")
				members := slices.Sorted(func(yield func(string) bool) {
					for k := range m {
						if !yield(k) {
							return
						}
					}
				})
				want := slices.Clone(tc.want)
				for _, name := range tc.want {
					// The SDK drops type annotations it understands but
					// keeps those of types it maps to strings.
					if _, ok := m[name+"@odata.type"]; ok {
						want = append(want, name+"@odata.type")
					}
				}
				slices.Sort(want)
				if !slices.Equal(members, want) {
					t.Errorf("%s $select=%s: members %v, want %v", tc.filter.text, tc.sel, members, want)
				}
				if v, ok := m["Nope"]; slices.Contains(tc.want, "Nope") && (!ok || v != nil) {
					t.Errorf("$select of a missing property: %v, want null", v)
				}
				if x := byRK[rk]; x != nil && slices.Contains(tc.want, "I") {
					if got, ok := m["I"].(float64); !ok || int64(got) != x.props["I"].i {
						t.Errorf("%s: I = %v, want %d", rk, m["I"], x.props["I"].i)
					}
				}
			}
		}
		var want []string
		for _, k := range tc.filter.want(ents) {
			want = append(want, strings.SplitN(k, "|", 2)[1])
		}
		if !slices.Equal(rks, want) {
			t.Errorf("%s top %d: got %v\nwant %v", tc.filter.text, tc.top, rks, want)
		}
		if minPages := (len(want) + int(tc.top) - 1) / int(tc.top); pages < minPages {
			t.Errorf("%s top %d: %d pages for %d entities", tc.filter.text, tc.top, pages, len(want))
		}
	}
}

// TestFilterPaging follows filtered queries with more than 1000 matches
// across partitions to their end with the SDK's pager: every match exactly
// once, in key order.
func TestFilterPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	// 6000 entities in 6 partitions; Grp cycles through 0..10 and the
	// string "11".
	const parts, per = 6, 1000
	ents := make([]*fEnt, 0, parts*per)
	for p := 0; p < parts; p++ {
		for r := 0; r < per; r++ {
			i := p*per + r
			props := map[string]fVal{"Grp": fI32(int64(i % 12))}
			if i%12 == 11 {
				props["Grp"] = fStr("11") // another type under the name
			}
			ents = append(ents, &fEnt{pk: fmt.Sprintf("p%d", p), rk: fmt.Sprintf("%04d", r), props: props})
		}
	}
	var mu sync.Mutex
	var failed error
	parallel(len(ents)/100, 6, func(b int) {
		actions := make([]aztables.TransactionAction, 100)
		for i := range actions {
			actions[i] = aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: ents[b*100+i].body()}
		}
		if _, err := c.SubmitTransaction(bg, actions, nil); err != nil {
			mu.Lock()
			failed = err
			mu.Unlock()
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}

	// Grp lt 5 alone also matches the strings (a type mismatch: lt is
	// true); with Grp ge 0 it matches the 2500 numbers 0..4.
	grpLt5 := fAnd(fCmp("Grp", "ge", fLitOf("0", fI32(0))), fCmp("Grp", "lt", fLitOf("5", fI32(5))))
	pkRange := fAnd(fCmp("PartitionKey", "ge", fLitOf("'p1'", fStr("p1"))), fCmp("PartitionKey", "lt", fLitOf("'p5'", fStr("p5"))))
	for _, tc := range []struct {
		x        fx
		top      int32
		minPages int
	}{
		{grpLt5, 0, 3},
		{fCmp("Grp", "lt", fLitOf("5", fI32(5))), 0, 3},
		{grpLt5, 700, 4},
		{fAnd(pkRange, grpLt5), 0, 2},
		{pkRange, 0, 4},
		{fOr(fCmp("Grp", "eq", fLitOf("0", fI32(0))), fCmp("RowKey", "ge", fLitOf("'0990'", fStr("0990")))), 0, 1},
	} {
		opts := &aztables.ListEntitiesOptions{Filter: to.Ptr(tc.x.text)}
		if tc.top > 0 {
			opts.Top = to.Ptr(tc.top)
		}
		got, pages, err := fList(c, opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.x.text, err)
		}
		want := tc.x.want(ents)
		if !slices.Equal(got, want) {
			t.Errorf("%s top %d: %d keys, want %d (first difference at %d)", tc.x.text, tc.top, len(got), len(want), fFirstDiff(got, want))
		}
		limit := 1000
		if tc.top > 0 {
			limit = int(tc.top)
		}
		for _, n := range pages {
			if n > limit {
				t.Errorf("%s: page of %d", tc.x.text, n)
			}
		}
		if len(pages) < tc.minPages {
			t.Errorf("%s top %d: %d pages for %d matches", tc.x.text, tc.top, len(pages), len(want))
		}
	}
	if n := len(grpLt5.want(ents)); n != 2500 {
		t.Fatalf("the data has %d matches of %s, want 2500", n, grpLt5.text)
	}
}

func fFirstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFilterKeyRanges covers point, partition, prefix-range and OR-ed point
// queries on PartitionKey and RowKey, with keys that are empty, contain
// quotes or non-ASCII characters and differ only in case, paged with small
// $top so that continuations land inside the ranges.
func TestFilterKeyRanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	pks := []string{"", "a", "a'b", "ab", "abc", "abd", "b", "B", "p1", "p2", "p3", "zoë", "é"}
	rks := []string{"", "a", "ab", "abc", "abcd", "abd", "b", "r1", "r10", "r2", "Z", "ü"}
	var ents []*fEnt
	for _, pk := range pks {
		var actions []aztables.TransactionAction
		for _, rk := range rks {
			x := &fEnt{pk: pk, rk: rk, props: map[string]fVal{"V": fI32(int64(len(ents)))}}
			ents = append(ents, x)
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: x.body()})
		}
		if _, err := c.SubmitTransaction(bg, actions, nil); err != nil {
			t.Fatalf("partition %q: %v", pk, err)
		}
	}
	s := func(v string) fLit { return fLitOf("'"+strings.ReplaceAll(v, "'", "''")+"'", fStr(v)) }
	pk := func(op, v string) fx { return fCmp("PartitionKey", op, s(v)) }
	rk := func(op, v string) fx { return fCmp("RowKey", op, s(v)) }
	for _, x := range []fx{
		pk("eq", "abc"),
		pk("eq", ""),
		pk("eq", "nope"),
		fAnd(pk("eq", "abc"), rk("eq", "abd")),
		fAnd(pk("eq", ""), rk("eq", "")),
		fAnd(pk("eq", "a'b"), rk("eq", "ü")),
		fAnd(pk("eq", "p1"), rk("ge", "ab"), rk("lt", "ac")),
		fAnd(pk("eq", "p1"), rk("gt", "r1"), rk("lt", "r2")),
		fAnd(rk("ge", "ab"), rk("lt", "ac")),
		fAnd(pk("ge", "ab"), pk("lt", "ac")),
		fAnd(pk("gt", "a"), pk("le", "b")),
		fAnd(pk("ge", "B"), pk("lt", "C")),
		pk("ge", "é"),
		pk("gt", "zoë"),
		fOr(pk("lt", "a"), pk("ge", "zoë")),
		fAnd(pk("eq", "p2"), fOr(rk("eq", "r1"), rk("eq", "r10"), rk("eq", "nope"))),
		fOr(fAnd(pk("eq", "p1"), rk("eq", "r2")), fAnd(pk("eq", "zoë"), rk("eq", "ü")), fAnd(pk("eq", "a'b"), rk("eq", "Z")), fAnd(pk("eq", ""), rk("eq", "b"))),
		fAnd(fCmpL(s("p3"), "eq", "PartitionKey"), fCmpL(s("r2"), "le", "RowKey")),
		fAnd(pk("ne", "p1"), pk("lt", "b")),
		fAnd(fNot(pk("lt", "p1")), rk("eq", "a")),
		rk("eq", "ü"),
		rk("eq", ""),
		fAnd(pk("ge", "p"), pk("lt", "q"), fNot(fOr(rk("eq", "a"), rk("eq", "b")))),
		fAnd(pk("eq", "p1"), fCmp("RowKey", "eq", fLitOf("1", fI32(1)))),
		fAnd(pk("eq", "p1"), fCmp("RowKey", "ne", fLitOf("1", fI32(1)))),
	} {
		for _, top := range []int32{0, 1, 5} {
			fCheck(t, c, ents, x, top)
		}
	}
}

// TestFilterTables filters Query Tables by TableName, including the prefix
// pattern of the SDK helpers, and pages the result.
func TestFilterTables(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	names := []string{"aba", "abb9", "abc", "abc1", "abc2", "abcz", "abd", "abd0", "abe", "xyz", "zzz"}
	for _, n := range names {
		if _, err := e.service.CreateTable(bg, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	var ents []*fEnt
	for _, n := range names {
		ents = append(ents, &fEnt{pk: n, props: map[string]fVal{"TableName": fStr(n)}})
	}
	s := func(v string) fLit { return fLitOf("'"+v+"'", fStr(v)) }
	tn := func(op, v string) fx { return fCmp("TableName", op, s(v)) }
	for _, x := range []fx{
		tn("eq", "abc1"),
		tn("eq", "nope"),
		fAnd(tn("ge", "abc"), tn("lt", "abd")),
		fAnd(tn("ge", "ab"), tn("lt", "ac")),
		tn("ne", "abc1"),
		tn("gt", "abd"),
		tn("le", "abc"),
		fCmpL(s("abd"), "le", "TableName"),
		fNot(tn("eq", "abd")),
		fOr(tn("eq", "abc"), tn("eq", "zzz"), tn("eq", "nope")),
		fCmp("Other", "eq", s("x")),
		fNot(fCmp("Other", "eq", s("x"))),
		fCmp("TableName", "eq", fLitOf("1", fI32(1))),
		fCmp("TableName", "ne", fLitOf("1", fI32(1))),
	} {
		want := x.want(ents)
		for i, k := range want {
			want[i] = strings.TrimSuffix(k, "|")
		}
		for _, top := range []int32{0, 1, 2} {
			opts := &aztables.ListTablesOptions{Filter: to.Ptr(x.text)}
			if top > 0 {
				opts.Top = to.Ptr(top)
			}
			var got []string
			p := e.service.NewListTablesPager(opts)
			for p.More() {
				page, err := p.NextPage(bg)
				if err != nil {
					t.Fatalf("%s: %v", x.text, err)
				}
				if top > 0 && len(page.Tables) > int(top) {
					t.Errorf("%s: page of %d, top %d", x.text, len(page.Tables), top)
				}
				for _, tp := range page.Tables {
					got = append(got, *tp.Name)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (top %d):\n got  %v\n want %v", x.text, top, got, want)
			}
		}
	}
}

// TestFilterInvalid checks that malformed and unsupported filters are
// 400 InvalidInput, on Query Entities and on Query Tables.
func TestFilterInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, name := e.newTable()
	if _, err := c.AddEntity(bg, []byte(`{"PartitionKey":"p","RowKey":"r","I":1}`), nil); err != nil {
		t.Fatal(err)
	}
	sixteen := make([]string, 16)
	for i := range sixteen {
		sixteen[i] = fmt.Sprintf("I eq %d", i)
	}
	for _, f := range []string{
		"I eq", "eq 5", "I 5", "I eq 5 and", "and I eq 5", "I eq 5 or or I eq 6", "I eq 5 xor I eq 6",
		"(I eq 5", "I eq 5)", "()", "not", "I eq 5 I eq 6",
		"I eq 2147483648", "I eq -2147483649", "I eq 9223372036854775808L", "I eq 1.5.2", "I eq 12ab", "I eq 1e999",
		"S eq 'abc", "S eq \"abc\"", "S eq abc eq 1",
		"T eq datetime'2024-13-01T00:00:00Z'", "T eq datetime'yesterday'", "T eq datetime'2024-01-01T25:00:00Z'",
		"G eq guid'123'", "G eq guid'c9da6455-213d-42c9-9a79-3e9149a5783g'",
		"X eq X'0'", "X eq X'zz'", "X eq binary'abc'", "X eq hex'00'",
		"startswith(S, 'a')", "substringof('a', S)", "length(S) eq 1", "tolower(S) eq 'a'",
		"I add 1 eq 2", "I eq 1 add 1", "I mod 2 eq 0", "-I eq 1",
		"S eq null", "null eq S",
		"S eq I", "'a' eq 'a'", "1 eq 1",
		"Tags/any(t: t eq 'a')", "Address/City eq 'x'", "E has 'x'",
		strings.Join(sixteen, " or "),
		"I eq 1 and " + strings.Repeat("(", 100) + "I eq 1" + strings.Repeat(")", 100),
		"\x00", "I eq 'a\xffb'", "I eq 1, I eq 2",
	} {
		_, _, err := fList(c, &aztables.ListEntitiesOptions{Filter: to.Ptr(f)})
		if status, code := respStatus(t, err); status != 400 || code != "InvalidInput" {
			t.Errorf("entities $filter=%q: %d %s (%v), want 400 InvalidInput", f, status, code, err)
		}
	}
	for _, f := range []string{"TableName eq", "TableName eq 'a", "startswith(TableName, 'a')", "TableName eq null"} {
		p := e.service.NewListTablesPager(&aztables.ListTablesOptions{Filter: to.Ptr(f)})
		_, err := p.NextPage(bg)
		if status, code := respStatus(t, err); status != 400 || code != "InvalidInput" {
			t.Errorf("tables $filter=%q: %d %s (%v), want 400 InvalidInput", f, status, code, err)
		}
	}
	// The message tells the client what is wrong and where.
	for f, want := range map[string]string{
		"I eq 5 and length(S) eq 1": "at position 11.",
		"I eq 2147483648":           "at position 5.",
		"S eq 'abc":                 "at position 5.",
	} {
		r := e.send(rawReq{method: "GET", path: e.tablePath(name) + "()?$filter=" + url.QueryEscape(f)})
		wantError(t, r, 400, "InvalidInput")
		oe := rawObject(t, rawObject(t, r.body)["odata.error"])
		if msg := str(t, rawObject(t, oe["message"]), "value"); !strings.Contains(msg, want) {
			t.Errorf("$filter=%q: message %q does not say %q", f, msg, want)
		}
	}
}

// TestFilterEmpty checks that an empty $filter, and one of whitespace
// only, mean no filter; and that the OData options the service does not
// implement are 501 NotImplemented.
func TestFilterEmpty(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	c, name := e.newTable()
	var all []string
	for i := range 5 {
		pk, rk := fmt.Sprintf("p%d", i%2), fmt.Sprintf("r%d", i)
		if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": rk}), nil); err != nil {
			t.Fatal(err)
		}
		all = append(all, pk+"|"+rk)
	}
	slices.Sort(all)
	for _, f := range []string{"", " ", "   ", "\t", " \r\n "} {
		got, _, err := fList(c, &aztables.ListEntitiesOptions{Filter: to.Ptr(f)})
		if err != nil || !slices.Equal(got, all) {
			t.Errorf("entities $filter=%q: %v %v, want %v", f, got, err, all)
		}
		p := e.service.NewListTablesPager(&aztables.ListTablesOptions{Filter: to.Ptr(f)})
		page, err := p.NextPage(bg)
		if err != nil || len(page.Tables) != 1 || *page.Tables[0].Name != name {
			t.Errorf("tables $filter=%q: %v %v", f, page.Tables, err)
		}
	}
	for _, q := range []string{"$filter=", "$filter=%20", "$filter=+", "$filter=%20%20&$top=1000"} {
		r := e.send(rawReq{method: "GET", path: e.tablePath(name) + "()?" + q})
		wantStatus(t, r, 200)
		if n := len(rawValue(t, r.body)); n != len(all) {
			t.Errorf("?%s: %d entities, want %d", q, n, len(all))
		}
	}

	for _, q := range []string{
		"$orderby=RowKey", "$orderby=RowKey%20desc", "$skip=1", "$expand=x", "$count=true",
		"$inlinecount=allpages", "$skiptoken=x", "$search=x", "$filter=I%20eq%201&$orderby=I",
	} {
		for _, path := range []string{e.tablePath(name) + "()", e.tablePath(name), "/devstoreaccount1/Tables"} {
			r := e.send(rawReq{method: "GET", path: path + "?" + q})
			wantError(t, r, 501, "NotImplemented")
		}
	}
}

// TestTopZero checks that $top=0 answers 200 with no entities (or tables)
// and no continuation, as Azure does, whatever the table holds; Storage
// Explorer sends it. A missing table is still 404.
func TestTopZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, name := e.newTable()
	for i := range 3 {
		if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": fmt.Sprint(i)}), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{
		e.tablePath(name) + "()?$top=0",
		e.tablePath(name) + "()?$top=0&$filter=PartitionKey%20eq%20'p'",
		e.tablePath(name) + "()?$top=0&$filter=RowKey%20gt%20'0'&$select=RowKey",
		e.tablePath(name) + "()?$top=0&NextPartitionKey=" + odata.EncodeContinuation("p"),
		"/devstoreaccount1/Tables?$top=0",
		"/devstoreaccount1/Tables?$top=000&$filter=TableName%20eq%20'" + name + "'",
	} {
		r := e.send(rawReq{method: "GET", path: path})
		wantStatus(t, r, 200)
		if v := rawValue(t, r.body); len(v) != 0 {
			t.Errorf("%s: %d items", path, len(v))
		}
		for h := range r.header {
			if strings.HasPrefix(strings.ToLower(h), "x-ms-continuation") {
				t.Errorf("%s: continuation %s: %s", path, h, r.header.Get(h))
			}
		}
	}
	wantError(t, e.send(rawReq{method: "GET", path: e.tablePath("nosuchtable") + "()?$top=0"}), 404, "TableNotFound")
}

// TestFilterBoundedScan runs filters on a server whose scans read 16 rows a
// chunk and whose budget is spent after every chunk. A filter that the
// primary key cannot narrow to the matching rows (a property, a RowKey
// without its PartitionKey, ne) is a bounded scan: pages end early with a
// continuation, some with no entities at all. A filter that the key turns
// into index ranges returns full pages. Either way, following the
// continuations yields every match exactly once, over raw HTTP and through
// the SDK.
func TestFilterBoundedScan(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnvWith(t, store.Options{ScanChunk: 16, ScanBudget: time.Nanosecond})
	c, name := e.newTable()
	var ents []*fEnt
	for p := 0; p < 3; p++ {
		var actions []aztables.TransactionAction
		for r := 0; r < 100; r++ {
			i := len(ents)
			x := &fEnt{pk: fmt.Sprintf("p%d", p), rk: fmt.Sprintf("r%03d", r), props: map[string]fVal{"N": fI32(int64(i))}}
			if i%37 == 0 {
				x.props["Hit"] = fBool(true)
			}
			ents = append(ents, x)
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: x.body()})
		}
		if _, err := c.SubmitTransaction(bg, actions, nil); err != nil {
			t.Fatal(err)
		}
	}
	s := func(v string) fLit { return fLitOf("'"+v+"'", fStr(v)) }
	pk := func(op, v string) fx { return fCmp("PartitionKey", op, s(v)) }
	rk := func(op, v string) fx { return fCmp("RowKey", op, s(v)) }
	for _, tc := range []struct {
		x       fx
		top     int
		scanned bool // a bounded scan, not index ranges
	}{
		{fBare("Hit"), 0, true},
		{fBare("Hit"), 1, true},
		{fCmp("N", "ge", fLitOf("290", fI32(290))), 4, true},
		{fAnd(pk("eq", "p1"), fBare("Hit")), 0, true},
		{fOr(fCmp("N", "eq", fLitOf("5", fI32(5))), rk("eq", "r050")), 0, true},
		{rk("eq", "r050"), 0, true},
		{fAnd(rk("eq", "r050"), fCmp("N", "ge", fLitOf("0", fI32(0)))), 0, true},
		{fAnd(pk("ge", "p1"), rk("ge", "r095")), 0, true},
		{fAnd(pk("ne", "p1"), rk("lt", "r003")), 0, true},

		{pk("eq", "p1"), 0, false},
		{pk("eq", "p1"), 30, false},
		{fAnd(pk("ge", "p1"), pk("lt", "p2")), 7, false},
		{fAnd(pk("eq", "p1"), rk("ge", "r010"), rk("lt", "r020")), 0, false},
		{fAnd(pk("eq", "p2"), fOr(rk("eq", "r001"), rk("eq", "r099"))), 1, false},
		{fOr(fAnd(pk("eq", "p0"), rk("eq", "r007")), fAnd(pk("eq", "p2"), rk("eq", "r070"))), 0, false},
	} {
		want := tc.x.want(ents)
		base := e.tablePath(name) + "()?$filter=" + url.QueryEscape(tc.x.text)
		top := 1000
		if tc.top > 0 {
			base += "&$top=" + strconv.Itoa(tc.top)
			top = tc.top
		}
		var got []string
		pages, empty, early := 0, 0, 0
		path := base
		for {
			pages++
			if pages > 1000 {
				t.Fatalf("%s: no end to the pages", tc.x.text)
			}
			r := e.send(rawReq{method: "GET", path: path})
			wantStatus(t, r, 200)
			vals := rawValue(t, r.body)
			if len(vals) > top {
				t.Errorf("%s: page of %d, top %d", tc.x.text, len(vals), top)
			}
			for _, v := range vals {
				got = append(got, str(t, v, "PartitionKey")+"|"+str(t, v, "RowKey"))
			}
			npk, nrk := r.header.Get("x-ms-continuation-NextPartitionKey"), r.header.Get("x-ms-continuation-NextRowKey")
			if npk == "" {
				if nrk != "" {
					t.Errorf("%s: NextRowKey %q without NextPartitionKey", tc.x.text, nrk)
				}
				break
			}
			if len(vals) == 0 {
				empty++
			}
			if len(vals) < top {
				early++
			}
			path = base + "&NextPartitionKey=" + url.QueryEscape(npk) + "&NextRowKey=" + url.QueryEscape(nrk)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s top %d: got %v\nwant %v", tc.x.text, tc.top, got, want)
		}
		switch full := max(1, (len(want)+top-1)/top); {
		case tc.scanned && (empty == 0 || early == 0):
			t.Errorf("%s top %d: %d pages, %d empty, %d ended early; want a bounded scan, with pages that end early, some empty", tc.x.text, tc.top, pages, empty, early)
		case !tc.scanned && pages != full:
			t.Errorf("%s top %d: %d pages for %d matches, want %d full pages of index ranges", tc.x.text, tc.top, pages, len(want), full)
		}
		fCheck(t, c, ents, tc.x, int32(tc.top))
	}
}

// TestFilterContradictoryKeys: a filter whose key conditions no entity can
// meet answers 200 with no entities on every backend. On Citus such a
// statement can prune every shard, where PostgreSQL cannot read the system
// columns the query needs; the answer must still be an empty page.
func TestFilterContradictoryKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	for i := range 6 {
		pk, rk := fmt.Sprintf("p%d", i%3), fmt.Sprintf("r%d", i)
		if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": rk, "N": i}), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{
		"PartitionKey eq 'p1' and PartitionKey eq 'p2'",
		"PartitionKey eq 'p1' and (PartitionKey eq 'p2' and RowKey eq 'r2')",
		"(PartitionKey eq 'p0' or PartitionKey eq 'p1') and PartitionKey eq 'p2'",
		"PartitionKey eq 'p1' and PartitionKey gt 'p1'",
		"PartitionKey eq 'p1' and PartitionKey lt 'p0'",
		"PartitionKey eq 'p1' and RowKey eq 'r1' and RowKey eq 'r4'",
		"PartitionKey eq 'p1' and PartitionKey eq 'p2' and N ge 0",
		"PartitionKey eq 'p1' and not (PartitionKey eq 'p1')",
		"PartitionKey eq 'p1' and PartitionKey ne 'p1'",
	} {
		got, _, err := fList(c, &aztables.ListEntitiesOptions{Filter: to.Ptr(f)})
		if err != nil || len(got) != 0 {
			t.Errorf("$filter=%s: %v %v, want no entities", f, got, err)
		}
	}
}
