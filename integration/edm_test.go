package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// allBytes is every byte value once.
func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// TestEDMRoundTrip writes every EDM type at its limits through the SDK and
// reads it back, by point read and by query, unchanged (TS-046..TS-059).
func TestEDMRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	in := map[string]any{
		"I32Min": int32(math.MinInt32), "I32Max": int32(math.MaxInt32), "I32Zero": int32(0),
		"I64Min": aztables.EDMInt64(math.MinInt64), "I64Max": aztables.EDMInt64(math.MaxInt64),
		"I64Odd": aztables.EDMInt64(9007199254740993), "I64Neg1": aztables.EDMInt64(-1),
		"DTenth": 0.1, "DTiny": -1.5e-300, "DMax": math.MaxFloat64, "DDenormal": 5e-324,
		"DNegMax": -math.MaxFloat64, "DFrac": 3.25, "DLarge": 1e300,
		"DTMin":   aztables.EDMDateTime(mustTime("1601-01-01T00:00:00Z")),
		"DTMax":   aztables.EDMDateTime(mustTime("9999-12-31T23:59:59.9999999Z")),
		"DT7":     aztables.EDMDateTime(mustTime("2024-01-02T03:04:05.1234567Z")),
		"DTTick":  aztables.EDMDateTime(mustTime("2000-02-29T12:00:00.0000001Z")),
		"Guid":    aztables.EDMGUID("c9da6455-213d-42c9-9a79-3e9149a57833"),
		"GuidMax": aztables.EDMGUID("ffffffff-ffff-ffff-ffff-ffffffffffff"),
		"BinAll":  aztables.EDMBinary(allBytes()),
		"BinOne":  aztables.EDMBinary{0},
		"True":    true, "False": false,
		"StrUni":   "Zoë, 日本語, Ελληνικά, עברית",
		"StrAstro": "😀𝄞𠀀",
		"StrNul":   "a\x00b\x01c\x00",
		"StrCtl":   "\t\n\r\x1f\x7f\u0085",
		"StrEmpty": "",
		"StrJSON":  `{"x":"\\"}'`,
		"StrBOM":   "\ufeffx\uffff\ue000",
	}
	for _, pk := range []string{"p", "p2"} {
		ent := aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: "r"}, Properties: in}
		if _, err := c.AddEntity(bg, mustJSON(t, ent), nil); err != nil {
			t.Fatal(err)
		}
	}
	compare := func(t *testing.T, got map[string]any) {
		t.Helper()
		if len(got) != len(in) {
			t.Errorf("got %d properties, want %d", len(got), len(in))
		}
		for name, want := range in {
			g, ok := got[name]
			if !ok {
				t.Errorf("%s missing", name)
				continue
			}
			switch w := want.(type) {
			case aztables.EDMDateTime:
				gt, ok := g.(aztables.EDMDateTime)
				if !ok || !time.Time(gt).Equal(time.Time(w)) {
					t.Errorf("%s = %#v, want %v", name, g, time.Time(w))
				}
			case aztables.EDMBinary:
				gb, ok := g.(aztables.EDMBinary)
				if !ok || !bytes.Equal(gb, w) {
					t.Errorf("%s = %#v, want %v", name, g, w)
				}
			case float64:
				gf, ok := g.(float64)
				if !ok || math.Float64bits(gf) != math.Float64bits(w) {
					t.Errorf("%s = %#v, want %v", name, g, w)
				}
			default:
				if !reflect.DeepEqual(g, want) {
					t.Errorf("%s = %#v (%T), want %#v (%T)", name, g, g, want, want)
				}
			}
		}
	}
	t.Run("PointRead", func(t *testing.T) {
		ent, _ := getEDM(t, c, "p", "r")
		compare(t, ent.Properties)
	})
	t.Run("Query", func(t *testing.T) {
		p := c.NewListEntitiesPager(nil)
		n := 0
		for p.More() {
			page, err := p.NextPage(bg)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range page.Entities {
				var ent aztables.EDMEntity
				if err := json.Unmarshal(b, &ent); err != nil {
					t.Fatal(err)
				}
				compare(t, ent.Properties)
				n++
			}
		}
		if n != 2 {
			t.Fatalf("listed %d", n)
		}
	})
	t.Run("EmptyBinary", func(t *testing.T) {
		c2, table := e.newTable()
		body := `{"PartitionKey":"p","RowKey":"r","B@odata.type":"Edm.Binary","B":""}`
		if _, err := c2.AddEntity(bg, []byte(body), nil); err != nil {
			t.Fatal(err)
		}
		_, m := e.getRaw(table, "p", "r")
		if string(m["B"]) != `""` || str(t, m, "B@odata.type") != "Edm.Binary" {
			t.Fatalf("B = %s", m["B"])
		}
		ent, _ := getEDM(t, c2, "p", "r")
		if b, ok := ent.Properties["B"].(aztables.EDMBinary); !ok || len(b) != 0 {
			t.Fatalf("B = %#v", ent.Properties["B"])
		}
	})
}

// TestEDMWireFormat checks on the wire what the SDK's re-marshalling
// through map[string]any hides: whole doubles keep ".0", special doubles are
// annotated strings, input forms are normalised (rest-protocol §4.2-§4.4).
func TestEDMWireFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, table := e.newTable()
	body := `{"PartitionKey":"p","RowKey":"r",
	"D5":5.0,"DNeg0":-0.0,"DInt":2147483648,"DNegInt":-2147483649,"DExp":1e2,"D1e21":1e21,"DSmall":1.5e-7,
	"DMax":1.7976931348623157e308,"DTiny":-1.5e-300,"DTenth":0.1,
	"DNaN@odata.type":"Edm.Double","DNaN":"NaN",
	"DInf@odata.type":"Edm.Double","DInf":"Infinity",
	"DNInf@odata.type":"Edm.Double","DNInf":"-Infinity",
	"DStr@odata.type":"Edm.Double","DStr":"3",
	"DAnnInt@odata.type":"Edm.Double","DAnnInt":7,
	"I32":2147483647,"I32Min":-2147483648,
	"I32Str@odata.type":"Edm.Int32","I32Str":"12345",
	"I64Num@odata.type":"Edm.Int64","I64Num":123,
	"I64Min@odata.type":"Edm.Int64","I64Min":"-9223372036854775808",
	"I64Max":"9223372036854775807","I64Max@odata.type":"Edm.Int64",
	"BStr@odata.type":"Edm.Boolean","BStr":"False",
	"B":true,
	"G@odata.type":"Edm.Guid","G":"C9DA6455-213D-42C9-9A79-3E9149A57833",
	"DT6@odata.type":"Edm.DateTime","DT6":"1973-10-04T00:00:00.000000Z",
	"DTHalf@odata.type":"Edm.DateTime","DTHalf":"2024-01-01T00:00:00.5000000Z",
	"DTMax@odata.type":"Edm.DateTime","DTMax":"9999-12-31T23:59:59.9999999Z",
	"DTMin@odata.type":"Edm.DateTime","DTMin":"1601-01-01T00:00:00Z",
	"Bin@odata.type":"Edm.Binary","Bin":"AAECAwT/",
	"S@odata.type":"Edm.String","S":"s\u0000\ud83d\ude00",
	"DTStr":"2024-01-01T00:00:00Z"}`
	r := e.send(rawReq{method: "POST", path: e.tablePath(table), body: []byte(body)})
	wantStatus(t, r, 201)
	want := map[string]string{
		"D5": `5.0`, "DNeg0": `-0.0`, "DInt": `2147483648.0`, "DNegInt": `-2147483649.0`, "DExp": `100.0`,
		"D1e21": `1E+21`, "DSmall": `1.5E-07`, "DMax": `1.7976931348623157E+308`, "DTiny": `-1.5E-300`, "DTenth": `0.1`,
		"DNaN": `"NaN"`, "DInf": `"Infinity"`, "DNInf": `"-Infinity"`, "DStr": `3.0`, "DAnnInt": `7.0`,
		"I32": `2147483647`, "I32Min": `-2147483648`, "I32Str": `12345`,
		"I64Num": `"123"`, "I64Min": `"-9223372036854775808"`, "I64Max": `"9223372036854775807"`,
		"BStr": `false`, "B": `true`,
		"G":   `"c9da6455-213d-42c9-9a79-3e9149a57833"`,
		"DT6": `"1973-10-04T00:00:00Z"`, "DTHalf": `"2024-01-01T00:00:00.5Z"`,
		"DTMax": `"9999-12-31T23:59:59.9999999Z"`, "DTMin": `"1601-01-01T00:00:00Z"`,
		"Bin": `"AAECAwT/"`, "S": `"s\u0000😀"`, "DTStr": `"2024-01-01T00:00:00Z"`,
	}
	annotated := map[string]string{
		"DNaN": "Edm.Double", "DInf": "Edm.Double", "DNInf": "Edm.Double",
		"I64Num": "Edm.Int64", "I64Min": "Edm.Int64", "I64Max": "Edm.Int64",
		"G": "Edm.Guid", "DT6": "Edm.DateTime", "DTHalf": "Edm.DateTime", "DTMax": "Edm.DateTime", "DTMin": "Edm.DateTime",
		"Bin": "Edm.Binary",
	}
	// Whole-number doubles carry their type too, so that clients that read
	// JSON numbers without their lexical form keep them Doubles; but not
	// for the Go SDK, which decodes an Edm.Double annotation to nil and
	// gets them bare, as Azure writes them.
	goAnnotated := maps.Clone(annotated)
	for _, name := range []string{"D5", "DNeg0", "DInt", "DNegInt", "DExp", "DStr", "DAnnInt"} {
		annotated[name] = "Edm.Double"
	}
	checkAs := func(t *testing.T, m map[string]json.RawMessage, annotations bool, annotated map[string]string) {
		t.Helper()
		for name, w := range want {
			got, ok := m[name]
			if !ok {
				t.Errorf("%s missing", name)
				continue
			}
			// Compare decoded strings (escaping may differ), raw numbers.
			if w[0] == '"' {
				var gs, ws string
				_ = json.Unmarshal(got, &gs)
				_ = json.Unmarshal([]byte(w), &ws)
				if gs != ws || got[0] != '"' {
					t.Errorf("%s = %s, want %s", name, got, w)
				}
			} else if string(got) != w {
				t.Errorf("%s = %s, want %s", name, got, w)
			}
			a, has := m[name+"@odata.type"]
			switch {
			case annotations && annotated[name] != "":
				if string(a) != `"`+annotated[name]+`"` {
					t.Errorf("%s@odata.type = %s, want %s", name, a, annotated[name])
				}
			case has:
				t.Errorf("%s has an annotation %s", name, a)
			}
		}
	}
	check := func(t *testing.T, m map[string]json.RawMessage, annotations bool) {
		t.Helper()
		checkAs(t, m, annotations, annotated)
	}
	t.Run("InsertResponse", func(t *testing.T) {
		check(t, rawObject(t, r.body), true)
	})
	t.Run("Minimal", func(t *testing.T) {
		_, m := e.getRaw(table, "p", "r")
		check(t, m, true)
	})
	t.Run("NoMetadata", func(t *testing.T) {
		r := e.send(rawReq{method: "GET", path: e.entityPath(table, "p", "r"), header: map[string]string{"Accept": "application/json;odata=nometadata"}})
		wantStatus(t, r, 200)
		check(t, rawObject(t, r.body), false)
	})
	t.Run("Query", func(t *testing.T) {
		r := e.send(rawReq{method: "GET", path: e.tablePath(table) + "()"})
		wantStatus(t, r, 200)
		v := rawValue(t, r.body)
		if len(v) != 1 {
			t.Fatalf("%d entities", len(v))
		}
		check(t, v[0], true)
	})
	t.Run("GoSDKUserAgent", func(t *testing.T) {
		ua := map[string]string{"User-Agent": "myapp azsdk-go-aztables/v1.3.0 (go1.26.8; linux)"}
		r := e.send(rawReq{method: "GET", path: e.entityPath(table, "p", "r"), header: ua})
		wantStatus(t, r, 200)
		checkAs(t, rawObject(t, r.body), true, goAnnotated)
		r = e.send(rawReq{method: "GET", path: e.tablePath(table) + "()", header: ua})
		wantStatus(t, r, 200)
		checkAs(t, rawValue(t, r.body)[0], true, goAnnotated)
	})
	t.Run("SDKView", func(t *testing.T) {
		// What the SDK makes of it: documents the SDK's own limits, so a
		// change on our side that it would notice shows up here.
		c := e.service.NewClient(table)
		ent, _ := getEDM(t, c, "p", "r")
		if ent.Properties["DNaN"] != nil || ent.Properties["D5"] != int32(5) || ent.Properties["DTenth"] != 0.1 {
			t.Fatalf("SDK view: DNaN=%#v D5=%#v DTenth=%#v", ent.Properties["DNaN"], ent.Properties["D5"], ent.Properties["DTenth"])
		}
		if ent.Properties["I64Min"] != aztables.EDMInt64(math.MinInt64) {
			t.Fatalf("I64Min = %#v", ent.Properties["I64Min"])
		}
	})
}

// TestValueLimits checks the size limits at their exact boundaries, and
// that nothing is stored when a limit is exceeded (TS-034..TS-036,
// TS-042, TS-048..TS-050, TS-053, TS-057).
func TestValueLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	emoji := "😀"
	manyProps := func(n int) map[string]any {
		m := map[string]any{}
		for i := 0; i < n; i++ {
			m[fmt.Sprintf("P%03d", i)] = int32(i)
		}
		return m
	}
	// Entities near 1 MiB by Azure's formula: 15 strings of 32768 units,
	// one of tail units, and optionally a Boolean.
	bigEntity := func(tail int, withBool bool) map[string]any {
		m := map[string]any{}
		for i := 0; i < 15; i++ {
			m[fmt.Sprintf("S%03d", i)] = strings.Repeat(string(rune('a'+i)), 32768)
		}
		m["S999"] = strings.Repeat("z", tail)
		if withBool {
			m["B"] = true
		}
		return m
	}
	tests := []struct {
		name  string
		props map[string]any
		code  string // "" = accepted
		size  int    // when non-zero, the Azure size the case is built to have
	}{
		{"String32768", map[string]any{"S": strings.Repeat("x", 32768)}, "", 0},
		{"String32769", map[string]any{"S": strings.Repeat("x", 32769)}, "PropertyValueTooLarge", 0},
		{"Emoji16384", map[string]any{"S": strings.Repeat(emoji, 16384)}, "", 0},
		{"Emoji16385", map[string]any{"S": strings.Repeat(emoji, 16385)}, "PropertyValueTooLarge", 0},
		{"Mixed32769", map[string]any{"S": strings.Repeat("x", 32767) + emoji}, "PropertyValueTooLarge", 0},
		{"Multibyte32768", map[string]any{"S": strings.Repeat("日", 32768)}, "", 0},
		{"Binary65536", map[string]any{"B": aztables.EDMBinary(bytes.Repeat(allBytes(), 256))}, "", 0},
		{"Binary65537", map[string]any{"B": aztables.EDMBinary(append(bytes.Repeat(allBytes(), 256), 7))}, "PropertyValueTooLarge", 0},
		{"Props252", manyProps(252), "", 0},
		{"Props253", manyProps(253), "TooManyProperties", 0},
		{"Name255", map[string]any{"N" + strings.Repeat("a", 254): "v"}, "", 0},
		{"Name256", map[string]any{"N" + strings.Repeat("a", 255): "v"}, "PropertyNameTooLong", 0},
		{"Entity1MiBMinus1", bigEntity(32598, true), "", 1<<20 - 1},
		{"EntityExactly1MiB", bigEntity(32604, false), "", 1 << 20},
		{"Entity1MiBPlus1", bigEntity(32599, true), "EntityTooLarge", 1<<20 + 1},
		{"Entity1MiBPlus2", bigEntity(32605, false), "EntityTooLarge", 1<<20 + 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := e.newTable()
			if tc.size != 0 {
				if got := azureSize("p", "r", tc.props); got != tc.size {
					t.Fatalf("test case has Azure size %d, want %d", got, tc.size)
				}
			}
			ent := aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: "p", RowKey: "r"}, Properties: tc.props}
			body := mustJSON(t, ent)
			_, err := c.AddEntity(bg, body, nil)
			if tc.code != "" {
				wantRespErr(t, err, 400, tc.code)
				_, err = c.GetEntity(bg, "p", "r", nil)
				wantRespErr(t, err, 404, "ResourceNotFound")
				// The upserts and a replace of an existing entity are
				// held to the same limits.
				for _, mode := range []aztables.UpdateMode{aztables.UpdateModeReplace, aztables.UpdateModeMerge} {
					_, err = c.UpsertEntity(bg, body, &aztables.UpsertEntityOptions{UpdateMode: mode})
					wantRespErr(t, err, 400, tc.code)
				}
				if _, err := c.AddEntity(bg, entity(t, "p", "r", map[string]any{"Small": "s"}), nil); err != nil {
					t.Fatal(err)
				}
				_, err = c.UpdateEntity(bg, body, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace})
				wantRespErr(t, err, 400, tc.code)
				wantProps(t, c, "p", "r", map[string]any{"Small": "s"})
				return
			}
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			got, _ := getEDM(t, c, "p", "r")
			if !reflect.DeepEqual(got.Properties, tc.props) {
				t.Fatalf("read back differs (%d properties, want %d)", len(got.Properties), len(tc.props))
			}
		})
	}
}

// TestMergeLimits: a merge whose merged result would break the property
// count or the 1 MiB size is rejected and the stored entity is unchanged,
// on every merge path (If-Match *, an ETag, and Insert Or Merge); a merge
// that stays within the limits near them succeeds (TS-088).
func TestMergeLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type mergeFn func(c *aztables.Client, body []byte, etag azcore.ETag) error
	paths := map[string]mergeFn{
		"IfMatchStar": func(c *aztables.Client, body []byte, _ azcore.ETag) error {
			_, err := c.UpdateEntity(bg, body, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge})
			return err
		},
		"IfMatchETag": func(c *aztables.Client, body []byte, etag azcore.ETag) error {
			_, err := c.UpdateEntity(bg, body, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge, IfMatch: &etag})
			return err
		},
		"InsertOrMerge": func(c *aztables.Client, body []byte, _ azcore.ETag) error {
			_, err := c.UpsertEntity(bg, body, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeMerge})
			return err
		},
	}
	numbered := func(prefix string, from, to int) map[string]any {
		m := map[string]any{}
		for i := from; i < to; i++ {
			m[fmt.Sprintf("%s%03d", prefix, i)] = int32(i)
		}
		return m
	}
	// 15 strings of 32768 units and one of 32554: 100 bytes short of 1 MiB.
	big := func() map[string]any {
		m := map[string]any{}
		for i := 0; i < 15; i++ {
			m[fmt.Sprintf("S%03d", i)] = strings.Repeat(string(rune('a'+i)), 32768)
		}
		m["S015"] = strings.Repeat("p", 32554)
		return m
	}
	if s := azureSize("p", "r", big()); s != 1<<20-100 {
		t.Fatalf("big entity has %d bytes", s)
	}
	cases := []struct {
		name    string
		initial map[string]any
		merge   map[string]any
		code    string
	}{
		{"Props250Plus3", numbered("P", 0, 250), numbered("Q", 0, 3), "TooManyProperties"},
		{"Props250Plus2", numbered("P", 0, 250), numbered("Q", 0, 2), ""},
		{"Props252Overwrite", numbered("P", 0, 252), numbered("P", 100, 252), ""},
		{"Props252PlusNull", numbered("P", 0, 252), map[string]any{"New": nil}, ""},
		{"SizePlusString", big(), map[string]any{"More": strings.Repeat("m", 41)}, "EntityTooLarge"},
		{"SizeFillsExactly", big(), map[string]any{"More": strings.Repeat("m", 40)}, ""},
		{"SizeOverwriteSame", big(), map[string]any{"S000": strings.Repeat("A", 32768)}, ""},
		{"SizeOverwriteLonger", big(), map[string]any{"S015": strings.Repeat("A", 32554+51)}, "EntityTooLarge"},
		{"SizeOverwriteShorterPlusNew", big(), map[string]any{"S000": "short", "More": strings.Repeat("m", 32000)}, ""},
	}
	for _, tc := range cases {
		for pname, merge := range paths {
			t.Run(tc.name+"/"+pname, func(t *testing.T) {
				t.Parallel()
				c, table := e.newTable()
				add, err := c.AddEntity(bg, mustJSON(t, aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: "p", RowKey: "r"}, Properties: tc.initial}), nil)
				if err != nil {
					t.Fatal(err)
				}
				before := e.tableSnapshot(table)
				err = merge(c, entity(t, "p", "r", tc.merge), add.ETag)
				if tc.code != "" {
					wantRespErr(t, err, 400, tc.code)
					if e.tableSnapshot(table) != before {
						t.Fatal("rejected merge changed the database")
					}
					ent, etag := getEDM(t, c, "p", "r")
					if etag != add.ETag || !reflect.DeepEqual(ent.Properties, tc.initial) {
						t.Fatal("rejected merge changed the entity")
					}
					return
				}
				if err != nil {
					t.Fatalf("merge: %v", err)
				}
				want := map[string]any{}
				for k, v := range tc.initial {
					want[k] = v
				}
				for k, v := range tc.merge {
					if v != nil {
						want[k] = v
					}
				}
				got, _ := getEDM(t, c, "p", "r")
				if !reflect.DeepEqual(got.Properties, want) {
					t.Fatalf("merged entity has %d properties, want %d", len(got.Properties), len(want))
				}
				if s := azureSize("p", "r", want); s > 1<<20 {
					t.Fatalf("test case builds an entity of %d bytes", s)
				}
			})
		}
	}
}

// TestTimestampAndETag: Timestamp is the server's, strictly increasing per
// write whatever the client sends; every write gives a new ETag, even back
// to back; reads change neither (TS-041, TS-066..TS-073, TS-089).
func TestTimestampAndETag(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	c, table := e.newTable()
	const sent = "2000-01-01T00:00:00Z"
	tsBody := func(extra string) []byte {
		return []byte(`{"PartitionKey":"p","RowKey":"r","Timestamp@odata.type":"Edm.DateTime","Timestamp":"` + sent + `"` + extra + `}`)
	}
	// read returns the Timestamp and ETag a point read reports, checking
	// that odata.etag and the header agree and that no property named
	// Timestamp was stored.
	read := func() (time.Time, string) {
		t.Helper()
		r, m := e.getRaw(table, "p", "r")
		ts := str(t, m, "Timestamp")
		if ts == sent {
			t.Fatal("the client's Timestamp was stored")
		}
		tm, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || !strings.HasSuffix(ts, "Z") {
			t.Fatalf("Timestamp %q: %v", ts, err)
		}
		if str(t, m, "odata.etag") != r.header.Get("ETag") {
			t.Fatalf("odata.etag %s, header %s", m["odata.etag"], r.header.Get("ETag"))
		}
		if tm.Year() < 2020 {
			t.Fatalf("Timestamp %s is not the server's time", ts)
		}
		return tm, r.header.Get("ETag")
	}
	seen := map[string]bool{}
	var lastTS time.Time
	step := func(name string, etag string) {
		t.Helper()
		ts, got := read()
		if etag != "" && got != etag {
			t.Fatalf("%s: response ETag %q, read ETag %q", name, etag, got)
		}
		if seen[got] {
			t.Fatalf("%s: ETag %q repeats", name, got)
		}
		seen[got] = true
		if !ts.After(lastTS) {
			t.Fatalf("%s: Timestamp %v not after %v", name, ts, lastTS)
		}
		lastTS = ts
	}
	add, err := c.AddEntity(bg, tsBody(`,"V":1`), nil)
	if err != nil {
		t.Fatal(err)
	}
	step("insert", string(add.ETag))
	writes := []struct {
		name string
		fn   func(etag azcore.ETag) (azcore.ETag, error)
	}{
		{"replace *", func(azcore.ETag) (azcore.ETag, error) {
			r, err := c.UpdateEntity(bg, tsBody(`,"V":2`), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace})
			return r.ETag, err
		}},
		{"replace etag", func(et azcore.ETag) (azcore.ETag, error) {
			r, err := c.UpdateEntity(bg, tsBody(`,"V":3`), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace, IfMatch: &et})
			return r.ETag, err
		}},
		{"merge *", func(azcore.ETag) (azcore.ETag, error) {
			r, err := c.UpdateEntity(bg, tsBody(`,"V":4`), nil)
			return r.ETag, err
		}},
		{"merge etag", func(et azcore.ETag) (azcore.ETag, error) {
			r, err := c.UpdateEntity(bg, tsBody(`,"V":5`), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeMerge, IfMatch: &et})
			return r.ETag, err
		}},
		{"upsert replace", func(azcore.ETag) (azcore.ETag, error) {
			r, err := c.UpsertEntity(bg, tsBody(`,"V":6`), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
			return r.ETag, err
		}},
		{"upsert merge", func(azcore.ETag) (azcore.ETag, error) {
			r, err := c.UpsertEntity(bg, tsBody(`,"V":7`), nil)
			return r.ETag, err
		}},
		{"same merge again", func(azcore.ETag) (azcore.ETag, error) {
			r, err := c.UpsertEntity(bg, tsBody(`,"V":7`), nil)
			return r.ETag, err
		}},
		{"post x-http-method merge", func(et azcore.ETag) (azcore.ETag, error) {
			r := e.send(rawReq{method: http.MethodPost, path: e.entityPath(table, "p", "r"), body: tsBody(`,"V":8`), header: map[string]string{"X-HTTP-Method": "MERGE", "If-Match": string(et)}})
			if r.status != 204 {
				return "", fmt.Errorf("status %d %s", r.status, r.body)
			}
			return azcore.ETag(r.header.Get("ETag")), nil
		}},
	}
	etag := add.ETag
	for _, w := range writes {
		got, err := w.fn(etag)
		if err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		step(w.name, string(got))
		etag = got
	}
	// Back-to-back writes, as fast as one client can send them.
	for i := 0; i < 20; i++ {
		r1, err := c.UpsertEntity(bg, tsBody(`,"V":9`), nil)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := c.UpsertEntity(bg, tsBody(`,"V":9`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if r1.ETag == r2.ETag || seen[string(r1.ETag)] {
			t.Fatalf("back-to-back writes gave ETags %q, %q", r1.ETag, r2.ETag)
		}
		seen[string(r1.ETag)] = true
		step("back-to-back", string(r2.ETag))
	}
	// Reads change neither the ETag nor the Timestamp nor the row.
	ts0, etag0 := read()
	snap := e.snapshot()
	for i := 0; i < 3; i++ {
		ts, et := read()
		if !ts.Equal(ts0) || et != etag0 {
			t.Fatal("a read changed the Timestamp or ETag")
		}
		all, _ := listAll(t, c, nil)
		if len(all) != 1 || all[0]["odata.etag"] != etag0 {
			t.Fatalf("listed ETag %v, read %q", all[0]["odata.etag"], etag0)
		}
		if all[0]["Timestamp"] == sent {
			t.Fatal("listed the client's Timestamp")
		}
	}
	if e.snapshot() != snap {
		t.Fatal("reads changed the database")
	}
}
