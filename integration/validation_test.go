package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// jsEscape is how the JS SDK writes a key literal in a URL: quotes doubled
// and left literal, everything else as encodeURIComponent.
func jsEscape(s string) string {
	s = strings.ReplaceAll(s, "'", "''")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// TestKeyRules checks the key rules (rest-protocol §4.11; TS-017..TS-029,
// TS-087): forbidden characters and oversize keys are OutOfRangeInput in
// the body and in the URL, allowed characters round-trip byte for byte
// (point reads through the URL included), missing keys are
// PropertiesNeedValue and non-string keys InvalidInput; a rejected request
// stores nothing.
func TestKeyRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("ForbiddenCharacters", func(t *testing.T) {
		t.Parallel()
		c, table := e.newTable()
		bad := []string{"/", `\`, "#", "?", "\t", "\n", "\r", "\x00", "\x01", "\x1f", "\x7f", "\u0080", "\u0085", "\u009f"}
		for _, ch := range bad {
			for _, which := range []string{"PartitionKey", "RowKey"} {
				pk, rk := "p", "r"
				if which == "PartitionKey" {
					pk = "a" + ch + "b"
				} else {
					rk = ch
				}
				name := fmt.Sprintf("%s %q", which, ch)
				body := mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": rk, "V": int32(1)})
				// In the body (insert) and in the URL (upserts, read,
				// delete, raw merge).
				_, err := c.AddEntity(bg, body, nil)
				if s, code := respStatus(t, err); s != 400 || code != "OutOfRangeInput" {
					t.Errorf("insert %s: %d %s", name, s, code)
				}
				for _, mode := range []aztables.UpdateMode{aztables.UpdateModeReplace, aztables.UpdateModeMerge} {
					_, err = c.UpsertEntity(bg, body, &aztables.UpsertEntityOptions{UpdateMode: mode})
					if s, code := respStatus(t, err); s != 400 || code != "OutOfRangeInput" {
						t.Errorf("upsert %s: %d %s", name, s, code)
					}
				}
				_, err = c.GetEntity(bg, pk, rk, nil)
				if s, code := respStatus(t, err); s != 400 || code != "OutOfRangeInput" {
					t.Errorf("get %s: %d %s", name, s, code)
				}
				_, err = c.DeleteEntity(bg, pk, rk, nil)
				if s, code := respStatus(t, err); s != 400 || code != "OutOfRangeInput" {
					t.Errorf("delete %s: %d %s", name, s, code)
				}
			}
		}
		if s := e.tableSnapshot(table); s != "" {
			t.Fatalf("rejected keys stored entities:\n%s", s)
		}
	})

	t.Run("AllowedCharacters", func(t *testing.T) {
		t.Parallel()
		c, table := e.newTable()
		good := []string{" ", "-", "_", ".", "@", ":", "'", "''", "O'Neil", "ü", "日本", "😀", "%", "%25", "100%2F", "+", "a+b", "a b",
			"  lead and trail  ", "(x)", "a,b;c=d", "$&!*~", "\u00a0", "\u00ff", "\ufeff", "\U0010FFFF", ""}
		for i, k := range good {
			pk, rk := k, fmt.Sprintf("r%02d", i)
			if i%2 == 1 {
				pk, rk = fmt.Sprintf("p%02d", i), k
			}
			// A plain map: EDMEntity would double the quotes in the body.
			if _, err := c.AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": rk, "I": int32(i)}), nil); err != nil {
				t.Errorf("insert %q: %v", k, err)
				continue
			}
			// The SDK refuses empty keys in URLs: raw HTTP covers those.
			sdkOK := pk != "" && rk != ""
			if sdkOK {
				ent, _ := getEDM(t, c, pk, rk)
				if ent.PartitionKey != pk || ent.RowKey != rk || ent.Properties["I"] != int32(i) {
					t.Errorf("point read of %q/%q returned %q/%q %v", pk, rk, ent.PartitionKey, ent.RowKey, ent.Properties)
				}
			}
			// The JS SDK's escaping (quotes literal) reaches the same entity.
			r := e.send(rawReq{method: "GET", path: fmt.Sprintf("%s(PartitionKey='%s',RowKey='%s')", e.tablePath(table), jsEscape(pk), jsEscape(rk))})
			if r.status != 200 {
				t.Errorf("JS-style point read of %q: %d %s", k, r.status, trunc(r.body))
			} else if m := rawObject(t, r.body); str(t, m, "PartitionKey") != pk || str(t, m, "RowKey") != rk {
				t.Errorf("JS-style point read of %q returned %s/%s", k, m["PartitionKey"], m["RowKey"])
			}
			merge := mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": rk, "M": true})
			if sdkOK {
				if _, err := c.UpdateEntity(bg, merge, nil); err != nil {
					t.Errorf("merge %q: %v", k, err)
				}
			} else {
				r := e.send(rawReq{method: "MERGE", path: e.entityPath(table, pk, rk), body: merge, header: map[string]string{"If-Match": "*"}})
				if r.status != 204 {
					t.Errorf("merge %q: %d %s", k, r.status, trunc(r.body))
				}
			}
		}
		all, _ := listAll(t, c, nil)
		if len(all) != len(good) {
			t.Fatalf("listed %d, want %d", len(all), len(good))
		}
		found := map[string]bool{}
		for _, m := range all {
			found[m["PartitionKey"].(string)+"\xff"+m["RowKey"].(string)] = m["M"] == true
		}
		for i, k := range good {
			pk, rk := k, fmt.Sprintf("r%02d", i)
			if i%2 == 1 {
				pk, rk = fmt.Sprintf("p%02d", i), k
			}
			if !found[pk+"\xff"+rk] {
				t.Errorf("%q not listed exactly (or not merged)", k)
			}
			if pk == "" || rk == "" {
				r := e.send(rawReq{method: "DELETE", path: e.entityPath(table, pk, rk), header: map[string]string{"If-Match": "*"}})
				if r.status != 204 {
					t.Errorf("delete %q: %d %s", k, r.status, trunc(r.body))
				}
			} else if _, err := c.DeleteEntity(bg, pk, rk, nil); err != nil {
				t.Errorf("delete %q: %v", k, err)
			}
		}
		if s := e.tableSnapshot(table); s != "" {
			t.Fatalf("left after deleting everything:\n%s", s)
		}
	})

	t.Run("Length", func(t *testing.T) {
		t.Parallel()
		c, table := e.newTable()
		emoji := "😀"
		tests := []struct {
			name, key string
			ok        bool
		}{
			{"ASCII512", strings.Repeat("k", 512), true},
			{"ASCII513", strings.Repeat("k", 513), false},
			{"BMP512", strings.Repeat("日", 512), true}, // 1536 UTF-8 bytes
			{"BMP513", strings.Repeat("日", 513), false},
			{"Emoji256", strings.Repeat(emoji, 256), true}, // 512 UTF-16 units
			{"Emoji256Plus1", strings.Repeat(emoji, 256) + "x", false},
		}
		for _, tc := range tests {
			for _, asPK := range []bool{true, false} {
				pk, rk := tc.key, tc.name
				if !asPK {
					pk, rk = tc.name, tc.key
				}
				body := mustJSON(t, map[string]any{"PartitionKey": pk, "RowKey": rk})
				_, err := c.AddEntity(bg, body, nil)
				if !tc.ok {
					if s, code := respStatus(t, err); s != 400 || code != "OutOfRangeInput" {
						t.Errorf("%s (pk=%v): insert got %d %s, want 400 OutOfRangeInput", tc.name, asPK, s, code)
					}
					_, err = c.UpsertEntity(bg, body, nil)
					if s, code := respStatus(t, err); s != 400 || code != "OutOfRangeInput" {
						t.Errorf("%s (pk=%v): upsert got %d %s, want 400 OutOfRangeInput", tc.name, asPK, s, code)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s (pk=%v): %v", tc.name, asPK, err)
					continue
				}
				ent, _ := getEDM(t, c, pk, rk)
				if ent.PartitionKey != pk || ent.RowKey != rk {
					t.Errorf("%s: read back a different key", tc.name)
				}
			}
		}
		all, _ := listAll(t, c, nil)
		if len(all) != 6 {
			t.Fatalf("stored %d entities, want 6", len(all))
		}
		// The longest keys work as point reads through the URL.
		r := e.send(rawReq{method: "GET", path: e.entityPath(table, strings.Repeat(emoji, 256), "Emoji256")})
		wantStatus(t, r, 200)
	})

	t.Run("MissingOrNonStringKeys", func(t *testing.T) {
		t.Parallel()
		_, table := e.newTable()
		tests := []struct{ body, code string }{
			{`{"RowKey":"r","V":1}`, "PropertiesNeedValue"},
			{`{"PartitionKey":"p","V":1}`, "PropertiesNeedValue"},
			{`{"V":1}`, "PropertiesNeedValue"},
			{`{}`, "PropertiesNeedValue"},
			{`{"PartitionKey":null,"RowKey":"r"}`, "PropertiesNeedValue"},
			{`{"PartitionKey":"p","RowKey":null}`, "PropertiesNeedValue"},
			{`{"PartitionKey":1,"RowKey":"r"}`, "InvalidInput"},
			{`{"PartitionKey":"p","RowKey":true}`, "InvalidInput"},
			{`{"PartitionKey":"p","RowKey":1.5}`, "InvalidInput"},
			{`{"PartitionKey":{"a":"b"},"RowKey":"r"}`, "InvalidInput"},
			{`{"PartitionKey":["p"],"RowKey":"r"}`, "InvalidInput"},
			{`{"PartitionKey@odata.type":"Edm.Int32","PartitionKey":"1","RowKey":"r"}`, "InvalidInput"},
			{`{"PartitionKey":"p","RowKey":"r","RowKey@odata.type":"Edm.Guid"}`, "InvalidInput"},
		}
		for _, tc := range tests {
			r := e.send(rawReq{method: http.MethodPost, path: e.tablePath(table), body: []byte(tc.body)})
			t.Run(tc.body, func(t *testing.T) { wantError(t, r, 400, tc.code) })
		}
		if s := e.tableSnapshot(table); s != "" {
			t.Fatalf("stored:\n%s", s)
		}
		// Keys annotated as Edm.String are fine (Python sends that).
		r := e.send(rawReq{method: http.MethodPost, path: e.tablePath(table), body: []byte(`{"PartitionKey@odata.type":"Edm.String","PartitionKey":"p","RowKey":"r","RowKey@odata.type":"Edm.String"}`)})
		wantStatus(t, r, 201)
	})
}

// TestPropertyRules checks property names, duplicates, types and
// annotations with their error codes (rest-protocol §4.2, §4.3, §4.11;
// TS-038..TS-040, TS-057, TS-060, TS-061). Each body is sent as an insert
// (POST) and as an upsert (PUT) and must store nothing.
func TestPropertyRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	many := func(extra string) string {
		var b strings.Builder
		b.WriteString(`{"PartitionKey":"p","RowKey":"r"`)
		for i := 0; i < 30; i++ {
			fmt.Fprintf(&b, `,"P%02d":%d`, i, i)
		}
		return b.String() + extra + "}"
	}
	tests := []struct {
		name, props, code string
	}{
		// names
		{"Dash", `"a-b":1`, "PropertyNameInvalid"},
		{"LeadingDigit", `"1abc":1`, "PropertyNameInvalid"},
		{"AllDigits", `"123":1`, "PropertyNameInvalid"},
		{"Space", `"a b":1`, "PropertyNameInvalid"},
		{"Dot", `"a.b":1`, "PropertyNameInvalid"},
		{"Empty", `"":1`, "PropertyNameInvalid"},
		{"ControlU0001", `"a\u0001b":1`, "PropertyNameInvalid"},
		{"ControlU0000", `"a\u0000":1`, "PropertyNameInvalid"},
		{"ControlTab", `"a\tb":1`, "PropertyNameInvalid"},
		{"ControlU0081", `"a\u0081b":1`, "PropertyNameInvalid"},
		{"PrivateUseE000", `"a\ue000":1`, "PropertyNameInvalid"},
		{"Name256", `"` + strings.Repeat("n", 256) + `":1`, "PropertyNameTooLong"},
		// duplicates
		{"Duplicate", `"A":1,"A":2`, "DuplicatePropertiesSpecified"},
		{"DuplicateOtherType", `"A":1,"A":"x"`, "DuplicatePropertiesSpecified"},
		{"DuplicateAnnotation", `"A@odata.type":"Edm.Int64","A":"1","A@odata.type":"Edm.Int64"`, "DuplicatePropertiesSpecified"},
		{"DuplicateKey", `"PartitionKey":"p"`, "DuplicatePropertiesSpecified"},
		// types and annotations
		{"EdmDecimal", `"A@odata.type":"Edm.Decimal","A":"1.5"`, "InvalidInput"},
		{"EdmSingle", `"A@odata.type":"Edm.Single","A":1.5`, "InvalidInput"},
		{"EdmByte", `"A@odata.type":"Edm.Byte","A":1`, "InvalidInput"},
		{"EdmDateTimeOffset", `"A@odata.type":"Edm.DateTimeOffset","A":"2020-01-01T00:00:00Z"`, "InvalidInput"},
		{"AnnotationNotString", `"A@odata.type":5,"A":1`, "InvalidInput"},
		{"Int32Text", `"A@odata.type":"Edm.Int32","A":"abc"`, "InvalidInput"},
		{"Int32Overflow", `"A@odata.type":"Edm.Int32","A":2147483648`, "InvalidInput"},
		{"Int32Fraction", `"A@odata.type":"Edm.Int32","A":1.5`, "InvalidInput"},
		{"Int64Overflow", `"A@odata.type":"Edm.Int64","A":"9223372036854775808"`, "InvalidInput"},
		{"Int64Underflow", `"A@odata.type":"Edm.Int64","A":"-9223372036854775809"`, "InvalidInput"},
		{"Int64Text", `"A@odata.type":"Edm.Int64","A":"12a"`, "InvalidInput"},
		{"DoubleText", `"A@odata.type":"Edm.Double","A":"abc"`, "InvalidInput"},
		{"DoubleOverflowNumber", `"A":1e309`, "InvalidInput"},
		{"DoubleOverflowText", `"A@odata.type":"Edm.Double","A":"1.797693134862316e308"`, "InvalidInput"},
		{"DoubleHexText", `"A@odata.type":"Edm.Double","A":"0x10"`, "InvalidInput"},
		{"GuidBad", `"A@odata.type":"Edm.Guid","A":"xyz"`, "InvalidInput"},
		{"GuidNoHyphens", `"A@odata.type":"Edm.Guid","A":"c9da6455213d42c99a793e9149a57833"`, "InvalidInput"},
		{"BinaryBad", `"A@odata.type":"Edm.Binary","A":"!!!"`, "InvalidInput"},
		{"BinaryNumber", `"A@odata.type":"Edm.Binary","A":12`, "InvalidInput"},
		{"BooleanText", `"A@odata.type":"Edm.Boolean","A":"yes"`, "InvalidInput"},
		{"BooleanNumber", `"A@odata.type":"Edm.Boolean","A":1`, "InvalidInput"},
		{"StringNumber", `"A@odata.type":"Edm.String","A":5`, "InvalidInput"},
		{"DateTimeText", `"A@odata.type":"Edm.DateTime","A":"not a date"`, "InvalidInput"},
		{"DateTimeFeb30", `"A@odata.type":"Edm.DateTime","A":"2023-02-30T00:00:00Z"`, "InvalidInput"},
		{"DateTimeBefore1601", `"A@odata.type":"Edm.DateTime","A":"1600-12-31T23:59:59.9999999Z"`, "OutOfRangeInput"},
		{"DateTimeYear1", `"A@odata.type":"Edm.DateTime","A":"0001-01-01T00:00:00Z"`, "OutOfRangeInput"},
		{"DateTimeAfter9999", `"A@odata.type":"Edm.DateTime","A":"9999-12-31T23:30:00-01:00"`, "OutOfRangeInput"},
		{"ObjectValue", `"A":{"b":1}`, "InvalidInput"},
		{"ArrayValue", `"A":[1,2]`, "InvalidInput"},
		{"EmptyArrayValue", `"A":[]`, "InvalidInput"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, table := e.newTable()
			body := `{"PartitionKey":"p","RowKey":"r",` + tc.props + `}`
			r := e.send(rawReq{method: http.MethodPost, path: e.tablePath(table), body: []byte(body)})
			wantError(t, r, 400, tc.code)
			r = e.send(rawReq{method: http.MethodPut, path: e.entityPath(table, "p", "r"), body: []byte(body)})
			wantError(t, r, 400, tc.code)
			if tc.name != "DuplicateKey" { // the many-member path of duplicate detection
				r = e.send(rawReq{method: http.MethodPost, path: e.tablePath(table), body: []byte(many("," + tc.props))})
				wantError(t, r, 400, tc.code)
			}
			if s := e.tableSnapshot(table); s != "" {
				t.Fatalf("stored:\n%s", s)
			}
		})
	}
	t.Run("ValidNames", func(t *testing.T) {
		t.Parallel()
		c, _ := e.newTable()
		p := map[string]any{"_x": "1", "ü_ok": "2", "日本": "3", "Ab9_": "4", "Email": "5", "email": "6", "a\u0300": "7", "x" + strings.Repeat("y", 254): "8"}
		if _, err := c.AddEntity(bg, entity(t, "p", "r", p), nil); err != nil {
			t.Fatal(err)
		}
		wantProps(t, c, "p", "r", p)
	})
}
