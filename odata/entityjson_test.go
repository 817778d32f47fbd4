package odata

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

func TestDecodeEntityValues(t *testing.T) {
	t.Parallel()
	ticks := func(s string) int64 {
		v, ok := ParseDateTime(s)
		if !ok {
			t.Fatalf("bad test date %q", s)
		}
		return v
	}
	tests := []struct {
		name string
		body string
		want []Property // checked when err is nil
		err  error
	}{
		// Typing by lexical form.
		{"int32", `{"a":1}`, []Property{prop("a", vI32(1))}, nil},
		{"int32 min", `{"a":-2147483648}`, []Property{prop("a", vI32(math.MinInt32))}, nil},
		{"int32 max", `{"a":2147483647}`, []Property{prop("a", vI32(math.MaxInt32))}, nil},
		{"above int32 is double", `{"a":2147483648}`, []Property{prop("a", vDbl(2147483648))}, nil},
		{"below int32 is double", `{"a":-2147483649}`, []Property{prop("a", vDbl(-2147483649))}, nil},
		{"huge integer is double", `{"a":123456789012345678901234567890}`, []Property{prop("a", vDbl(123456789012345678901234567890))}, nil},
		{"integer overflowing double", `{"a":1` + strings.Repeat("0", 400) + `}`, nil, ErrInvalidInput},
		{"minus zero int", `{"a":-0}`, []Property{prop("a", vI32(0))}, nil},
		{"1.0 is double", `{"a":1.0}`, []Property{prop("a", vDbl(1))}, nil},
		{"exponent is double", `{"a":1e2}`, []Property{prop("a", vDbl(100))}, nil},
		{"Exponent is double", `{"a":1E+2}`, []Property{prop("a", vDbl(100))}, nil},
		{"negative zero double", `{"a":-0.0}`, []Property{prop("a", vDbl(math.Copysign(0, -1)))}, nil},
		{"0.1", `{"a":0.1}`, []Property{prop("a", vDbl(0.1))}, nil},
		{"tiny", `{"a":-1.5e-300}`, []Property{prop("a", vDbl(-1.5e-300))}, nil},
		{"max double", `{"a":1.7976931348623157e308}`, []Property{prop("a", vDbl(math.MaxFloat64))}, nil},
		{"above max double", `{"a":1.797693134862316e308}`, nil, ErrInvalidInput},
		{"13e7705", `{"a":13e7705}`, nil, ErrInvalidInput},
		{"negative overflow", `{"a":-1e400}`, nil, ErrInvalidInput},
		{"underflow to zero", `{"a":1e-400}`, []Property{prop("a", vDbl(0))}, nil},
		{"string", `{"a":"x"}`, []Property{prop("a", vStr("x"))}, nil},
		{"true", `{"a":true}`, []Property{prop("a", vBool(true))}, nil},
		{"false", `{"a":false}`, []Property{prop("a", vBool(false))}, nil},
		{"null dropped", `{"a":null,"b":1}`, []Property{prop("b", vI32(1))}, nil},
		{"object value", `{"a":{}}`, nil, ErrInvalidInput},
		{"array value", `{"a":[1,2]}`, nil, ErrInvalidInput},
		{"empty object", `{}`, nil, nil},
		{"whitespace", " \r\n\t{ \"a\" : 1 , \"b\" : \"x\" } \n", []Property{prop("a", vI32(1)), prop("b", vStr("x"))}, nil},
		{"byte order mark", "\xEF\xBB\xBF{\"a\":1}", []Property{prop("a", vI32(1))}, nil},
		{"body order", `{"z":1,"a":2,"m":3}`, []Property{prop("z", vI32(1)), prop("a", vI32(2)), prop("m", vI32(3))}, nil},
		{"case-sensitive names", `{"Email":"a","email":"b"}`, []Property{prop("Email", vStr("a")), prop("email", vStr("b"))}, nil},

		// Strings.
		{"escapes", `{"a":"\"\\\/\b\f\n\r\t\u00e9\u65E5\ud83d\ude00"}`, []Property{prop("a", vStr("\"\\/\b\f\n\r\té日😀"))}, nil},
		{"raw non-ASCII", `{"a":"é日😀"}`, []Property{prop("a", vStr("é日😀"))}, nil},
		{"U+0000 kept", `{"a":"x\u0000y\u0001"}`, []Property{prop("a", vStr("x\x00y\x01"))}, nil},
		{"escaped name", `{"\u0041b":1}`, []Property{prop("Ab", vI32(1))}, nil},

		// Annotations, before and after their value.
		{"int32 from string", `{"a@odata.type":"Edm.Int32","a":"12345"}`, []Property{prop("a", vI32(12345))}, nil},
		{"int32 annotation after", `{"a":"-5","a@odata.type":"Edm.Int32"}`, []Property{prop("a", vI32(-5))}, nil},
		{"int32 from number", `{"a@odata.type":"Edm.Int32","a":2147483647}`, []Property{prop("a", vI32(math.MaxInt32))}, nil},
		{"int32 string overflow", `{"a@odata.type":"Edm.Int32","a":"2147483648"}`, nil, ErrInvalidInput},
		{"int32 number overflow", `{"a@odata.type":"Edm.Int32","a":2147483648}`, nil, ErrInvalidInput},
		{"int32 string min", `{"a@odata.type":"Edm.Int32","a":"-2147483648"}`, []Property{prop("a", vI32(math.MinInt32))}, nil},
		{"int32 string underflow", `{"a@odata.type":"Edm.Int32","a":"-2147483649"}`, nil, ErrInvalidInput},
		{"int32 from fraction", `{"a@odata.type":"Edm.Int32","a":1.5}`, nil, ErrInvalidInput},
		{"int32 from 1.0", `{"a@odata.type":"Edm.Int32","a":1.0}`, nil, ErrInvalidInput},
		{"int32 from junk", `{"a@odata.type":"Edm.Int32","a":"abc"}`, nil, ErrInvalidInput},
		{"int32 from empty", `{"a@odata.type":"Edm.Int32","a":""}`, nil, ErrInvalidInput},
		{"int32 from bool", `{"a@odata.type":"Edm.Int32","a":true}`, nil, ErrInvalidInput},
		{"int64 min", `{"a@odata.type":"Edm.Int64","a":"-9223372036854775808"}`, []Property{prop("a", vI64(math.MinInt64))}, nil},
		{"int64 max", `{"a@odata.type":"Edm.Int64","a":"9223372036854775807"}`, []Property{prop("a", vI64(math.MaxInt64))}, nil},
		{"int64 2^53+1", `{"a@odata.type":"Edm.Int64","a":"9007199254740993"}`, []Property{prop("a", vI64(9007199254740993))}, nil},
		{"int64 from JSON integer", `{"a@odata.type":"Edm.Int64","a":9007199254740993}`, []Property{prop("a", vI64(9007199254740993))}, nil},
		{"int64 overflow", `{"a@odata.type":"Edm.Int64","a":"9223372036854775808"}`, nil, ErrInvalidInput},
		{"int64 underflow", `{"a@odata.type":"Edm.Int64","a":"-9223372036854775809"}`, nil, ErrInvalidInput},
		{"int64 number overflow", `{"a@odata.type":"Edm.Int64","a":99999999999999999999}`, nil, ErrInvalidInput},
		{"int64 fraction", `{"a@odata.type":"Edm.Int64","a":"1.0"}`, nil, ErrInvalidInput},
		{"double from integer", `{"a@odata.type":"Edm.Double","a":5}`, []Property{prop("a", vDbl(5))}, nil},
		{"double from string", `{"a@odata.type":"Edm.Double","a":"3.14"}`, []Property{prop("a", vDbl(3.14))}, nil},
		{"double from integer string", `{"a@odata.type":"Edm.Double","a":"3"}`, []Property{prop("a", vDbl(3))}, nil},
		{"double python", `{"a":3.0,"a@odata.type":"Edm.Double"}`, []Property{prop("a", vDbl(3))}, nil},
		{"double NaN", `{"a@odata.type":"Edm.Double","a":"NaN"}`, []Property{prop("a", vDbl(math.NaN()))}, nil},
		{"double Infinity", `{"a@odata.type":"Edm.Double","a":"Infinity"}`, []Property{prop("a", vDbl(math.Inf(1)))}, nil},
		{"double -Infinity", `{"a@odata.type":"Edm.Double","a":"-Infinity"}`, []Property{prop("a", vDbl(math.Inf(-1)))}, nil},
		{"double string overflow", `{"a@odata.type":"Edm.Double","a":"1e400"}`, nil, ErrInvalidInput},
		{"double hex", `{"a@odata.type":"Edm.Double","a":"0x10"}`, nil, ErrInvalidInput},
		{"double underscore", `{"a@odata.type":"Edm.Double","a":"1_0"}`, nil, ErrInvalidInput},
		{"double inf", `{"a@odata.type":"Edm.Double","a":"inf"}`, nil, ErrInvalidInput},
		{"double junk", `{"a@odata.type":"Edm.Double","a":"abc"}`, nil, ErrInvalidInput},
		{"double bool", `{"a@odata.type":"Edm.Double","a":false}`, nil, ErrInvalidInput},
		{"boolean", `{"a@odata.type":"Edm.Boolean","a":true}`, []Property{prop("a", vBool(true))}, nil},
		{"boolean python False", `{"a":"False","a@odata.type":"Edm.Boolean"}`, []Property{prop("a", vBool(false))}, nil},
		{"boolean TRUE", `{"a@odata.type":"Edm.Boolean","a":"TRUE"}`, []Property{prop("a", vBool(true))}, nil},
		{"boolean yes", `{"a@odata.type":"Edm.Boolean","a":"yes"}`, nil, ErrInvalidInput},
		{"boolean number", `{"a@odata.type":"Edm.Boolean","a":1}`, nil, ErrInvalidInput},
		{"datetime min", `{"a@odata.type":"Edm.DateTime","a":"1601-01-01T00:00:00Z"}`, []Property{prop("a", vDT(MinDateTime))}, nil},
		{"datetime max", `{"a@odata.type":"Edm.DateTime","a":"9999-12-31T23:59:59.9999999Z"}`, []Property{prop("a", vDT(MaxDateTime))}, nil},
		{"datetime 9999 seconds", `{"a@odata.type":"Edm.DateTime","a":"9999-12-31T23:59:59Z"}`, []Property{prop("a", vDT(MaxDateTime-9999999))}, nil},
		{"datetime just below 1601", `{"a@odata.type":"Edm.DateTime","a":"1600-12-31T23:59:59.9999999Z"}`, nil, ErrOutOfRangeInput},
		{"datetime below 1601 by offset", `{"a@odata.type":"Edm.DateTime","a":"1601-01-01T00:00:00+00:01"}`, nil, ErrOutOfRangeInput},
		{"datetime python", `{"a":"1973-10-04T00:00:00.000000Z","a@odata.type":"Edm.DateTime"}`, []Property{prop("a", vDT(ticks("1973-10-04T00:00:00Z")))}, nil},
		{"datetime junk", `{"a@odata.type":"Edm.DateTime","a":"yesterday"}`, nil, ErrInvalidInput},
		{"datetime number", `{"a@odata.type":"Edm.DateTime","a":0}`, nil, ErrInvalidInput},
		{"guid upper", `{"a@odata.type":"Edm.Guid","a":"C9DA6455-213D-42C9-9A79-3E9149A57833"}`, []Property{prop("a", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833"))}, nil},
		{"guid braces", `{"a@odata.type":"Edm.Guid","a":"{c9da6455-213d-42c9-9a79-3e9149a57833}"}`, []Property{prop("a", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833"))}, nil},
		{"guid junk", `{"a@odata.type":"Edm.Guid","a":"xyz"}`, nil, ErrInvalidInput},
		{"guid no hyphens", `{"a@odata.type":"Edm.Guid","a":"c9da6455213d42c99a793e9149a57833"}`, nil, ErrInvalidInput},
		{"binary", `{"a@odata.type":"Edm.Binary","a":"YmluYXJ5"}`, []Property{prop("a", vBin([]byte("binary")))}, nil},
		{"binary padded", `{"a@odata.type":"Edm.Binary","a":"YQ=="}`, []Property{prop("a", vBin([]byte("a")))}, nil},
		{"binary unpadded", `{"a@odata.type":"Edm.Binary","a":"YQ"}`, []Property{prop("a", vBin([]byte("a")))}, nil},
		{"binary escaped slash", `{"a@odata.type":"Edm.Binary","a":"\/w=="}`, []Property{prop("a", vBin([]byte{0xff}))}, nil},
		{"binary empty", `{"a@odata.type":"Edm.Binary","a":""}`, []Property{prop("a", vBin([]byte{}))}, nil},
		{"binary all bytes", `{"a@odata.type":"Edm.Binary","a":"` + base64.StdEncoding.EncodeToString(allBytes()) + `"}`, []Property{prop("a", vBin(allBytes()))}, nil},
		{"binary junk", `{"a@odata.type":"Edm.Binary","a":"!!!!"}`, nil, ErrInvalidInput},
		{"binary bad padding", `{"a@odata.type":"Edm.Binary","a":"YQ="}`, nil, ErrInvalidInput},
		{"string annotated", `{"a@odata.type":"Edm.String","a":"x"}`, []Property{prop("a", vStr("x"))}, nil},
		{"string from number", `{"a@odata.type":"Edm.String","a":1}`, nil, ErrInvalidInput},
		{"unknown type", `{"a@odata.type":"Edm.Decimal","a":"1"}`, nil, ErrInvalidInput},
		{"other edm type", `{"a@odata.type":"Edm.DateTimeOffset","a":"2020-01-01T00:00:00Z"}`, nil, ErrInvalidInput},
		{"annotation not a string", `{"a@odata.type":5,"a":"1"}`, nil, ErrInvalidInput},
		{"annotation object", `{"a@odata.type":{},"a":"1"}`, nil, ErrInvalidInput},
		{"annotation of composite", `{"a@odata.type":"Edm.String","a":["x"]}`, nil, ErrInvalidInput},
		{"annotation without property", `{"a@odata.type":"Edm.Int64","b":1}`, []Property{prop("b", vI32(1))}, nil},
		{"bad annotation without property", `{"a@odata.type":"Edm.Nope"}`, nil, nil},
		{"annotation of null", `{"a@odata.type":"Edm.Nope","a":null}`, nil, nil},
		{"annotation of null after", `{"a":null,"a@odata.type":"Edm.Int64"}`, nil, nil},
		{"other annotation ignored", `{"a@odata.foo":[1,{"x":2}],"a":1,"@odata.context":"x"}`, []Property{prop("a", vI32(1))}, nil},
		{"control members ignored", `{"odata.etag":"W/\"x\"","odata.metadata":{"a":[1]},"odata.type":"x.y","a":1}`, []Property{prop("a", vI32(1))}, nil},
		{"Timestamp ignored", `{"Timestamp":"2020-01-01T00:00:00Z","Timestamp@odata.type":"Edm.DateTime","a":1}`, []Property{prop("a", vI32(1))}, nil},
		{"Timestamp of any type ignored", `{"Timestamp":{"x":[]},"a":1}`, []Property{prop("a", vI32(1))}, nil},

		// Names.
		{"name 255", `{"` + strings.Repeat("n", 255) + `":1}`, []Property{prop(strings.Repeat("n", 255), vI32(1))}, nil},
		{"name 256", `{"` + strings.Repeat("n", 256) + `":1}`, nil, ErrPropertyNameTooLong},
		{"name 255 utf16", `{"a` + strings.Repeat("𐐀", 127) + `":1}`, []Property{prop("a"+strings.Repeat("𐐀", 127), vI32(1))}, nil},
		{"name 256 utf16", `{"` + strings.Repeat("𐐀", 128) + `":1}`, nil, ErrPropertyNameTooLong},
		{"long invalid name", `{"` + strings.Repeat("-", 256) + `":1}`, nil, ErrPropertyNameTooLong},
		{"name with dash", `{"a-b":1}`, nil, ErrPropertyNameInvalid},
		{"name starting with digit", `{"123":1}`, nil, ErrPropertyNameInvalid},
		{"name with space", `{"a b":1}`, nil, ErrPropertyNameInvalid},
		{"name with dot", `{"a.b":1}`, nil, ErrPropertyNameInvalid},
		{"name with control", `{"a\u0001":1}`, nil, ErrPropertyNameInvalid},
		{"name with U+0081", `{"a\u0081":1}`, nil, ErrPropertyNameInvalid},
		{"name with U+E000", `{"a\ue000":1}`, nil, ErrPropertyNameInvalid},
		{"empty name", `{"":1}`, nil, ErrPropertyNameInvalid},
		{"underscore name", `{"_x1":1}`, []Property{prop("_x1", vI32(1))}, nil},
		{"unicode letters", `{"é日本":1}`, []Property{prop("é日本", vI32(1))}, nil},
		{"letter number first", `{"Ⅻx":1}`, []Property{prop("Ⅻx", vI32(1))}, nil},
		{"combining mark", `{"a\u0301":1}`, []Property{prop("a\u0301", vI32(1))}, nil},
		{"mark first", `{"\u0301a":1}`, nil, ErrPropertyNameInvalid},
		{"other digit", `{"x٣":1}`, []Property{prop("x٣", vI32(1))}, nil},
		{"format char", `{"a\u200db":1}`, []Property{prop("a\u200db", vI32(1))}, nil},
		{"name invalid before value too large", `{"a-b":"` + strings.Repeat("x", 40000) + `"}`, nil, ErrPropertyNameInvalid},
		{"null with invalid name", `{"a-b":null}`, nil, nil},
		{"partitionkey lower case is a property", `{"partitionkey":1}`, []Property{prop("partitionkey", vI32(1))}, nil},
		{"EntityType is a property", `{"EntityType":"x"}`, []Property{prop("EntityType", vStr("x"))}, nil},

		// Sizes.
		{"string 32768", `{"a":"` + strings.Repeat("x", 32768) + `"}`, []Property{prop("a", vStr(strings.Repeat("x", 32768)))}, nil},
		{"string 32769", `{"a":"` + strings.Repeat("x", 32769) + `"}`, nil, ErrPropertyValueTooLarge},
		{"string 16384 pairs", `{"a":"` + strings.Repeat("😀", 16384) + `"}`, []Property{prop("a", vStr(strings.Repeat("😀", 16384)))}, nil},
		{"string 16385 pairs", `{"a":"` + strings.Repeat("😀", 16385) + `"}`, nil, ErrPropertyValueTooLarge},
		{"string escaped pairs", `{"a":"` + strings.Repeat(`\ud83d\ude00`, 16385) + `"}`, nil, ErrPropertyValueTooLarge},
		{"string 32769 annotated", `{"a@odata.type":"Edm.String","a":"` + strings.Repeat("é", 32769) + `"}`, nil, ErrPropertyValueTooLarge},
		{"binary 65536", `{"a@odata.type":"Edm.Binary","a":"` + base64.StdEncoding.EncodeToString(make([]byte, 65536)) + `"}`, []Property{prop("a", vBin(make([]byte, 65536)))}, nil},
		{"binary 65537", `{"a@odata.type":"Edm.Binary","a":"` + base64.StdEncoding.EncodeToString(make([]byte, 65537)) + `"}`, nil, ErrPropertyValueTooLarge},
		{"binary 65537 unpadded", `{"a@odata.type":"Edm.Binary","a":"` + base64.RawStdEncoding.EncodeToString(make([]byte, 65537)) + `"}`, nil, ErrPropertyValueTooLarge},

		// Duplicates.
		{"duplicate", `{"a":1,"a":2}`, nil, ErrDuplicateProperties},
		{"duplicate null", `{"a":1,"a":null}`, nil, ErrDuplicateProperties},
		{"duplicate nulls", `{"a":null,"a":null}`, nil, ErrDuplicateProperties},
		{"duplicate annotation", `{"a@odata.type":"Edm.Int64","a@odata.type":"Edm.Int64","a":"1"}`, nil, ErrDuplicateProperties},
		{"duplicate key", `{"PartitionKey":"a","PartitionKey":"a"}`, nil, ErrDuplicateProperties},
		{"duplicate escaped", `{"ab":1,"\u0061b":2}`, nil, ErrDuplicateProperties},
		{"duplicate among many", `{` + manyMembers(40) + `,"p7":1}`, nil, ErrDuplicateProperties},
		{"duplicate annotation among many", `{` + manyMembers(40) + `,"p7@odata.type":"Edm.Int32","p7@odata.type":"Edm.Int32"}`, nil, ErrDuplicateProperties},
		{"ignored members may repeat", `{"odata.etag":"x","odata.etag":"y","a@x":1,"a@x":2}`, nil, nil},

		// Syntax and encoding.
		{"empty body", ``, nil, ErrInvalidInput},
		{"blank body", `   `, nil, ErrInvalidInput},
		{"array body", `[]`, nil, ErrInvalidInput},
		{"null body", `null`, nil, ErrInvalidInput},
		{"string body", `"x"`, nil, ErrInvalidInput},
		{"unterminated object", `{"a":1`, nil, ErrInvalidInput},
		{"unterminated string", `{"a":"x}`, nil, ErrInvalidInput},
		{"missing value", `{"a":}`, nil, ErrInvalidInput},
		{"missing colon", `{"a" 1}`, nil, ErrInvalidInput},
		{"trailing comma", `{"a":1,}`, nil, ErrInvalidInput},
		{"leading comma", `{,"a":1}`, nil, ErrInvalidInput},
		{"unquoted name", `{a:1}`, nil, ErrInvalidInput},
		{"single quotes", `{'a':1}`, nil, ErrInvalidInput},
		{"trailing data", `{"a":1}x`, nil, ErrInvalidInput},
		{"two objects", `{"a":1}{"b":2}`, nil, ErrInvalidInput},
		{"leading zero", `{"a":01}`, nil, ErrInvalidInput},
		{"plus sign", `{"a":+1}`, nil, ErrInvalidInput},
		{"bare fraction", `{"a":.5}`, nil, ErrInvalidInput},
		{"trailing dot", `{"a":5.}`, nil, ErrInvalidInput},
		{"bare exponent", `{"a":1e}`, nil, ErrInvalidInput},
		{"bare NaN", `{"a":NaN}`, nil, ErrInvalidInput},
		{"bare Infinity", `{"a":Infinity}`, nil, ErrInvalidInput},
		{"bad literal", `{"a":tru}`, nil, ErrInvalidInput},
		{"capital literal", `{"a":True}`, nil, ErrInvalidInput},
		{"bad escape", `{"a":"\x"}`, nil, ErrInvalidInput},
		{"short unicode escape", `{"a":"\u12"}`, nil, ErrInvalidInput},
		{"bad hex escape", `{"a":"\u12g4"}`, nil, ErrInvalidInput},
		{"lone high surrogate", `{"a":"\ud800"}`, nil, ErrInvalidInput},
		{"lone high surrogate then text", `{"a":"\ud800abcdef"}`, nil, ErrInvalidInput},
		{"high surrogate then BMP escape", `{"a":"\ud800\u0041"}`, nil, ErrInvalidInput},
		{"two high surrogates", `{"a":"\ud800\ud800"}`, nil, ErrInvalidInput},
		{"lone low surrogate", `{"a":"\udc00"}`, nil, ErrInvalidInput},
		{"lone surrogate in name", `{"a\ud800":1}`, nil, ErrInvalidInput},
		{"invalid UTF-8 value", "{\"a\":\"\xff\"}", nil, ErrInvalidInput},
		{"invalid UTF-8 name", "{\"a\xc3\":1}", nil, ErrInvalidInput},
		{"invalid UTF-8 after escape", "{\"a\":\"\\n\xff\"}", nil, ErrInvalidInput},
		{"invalid UTF-8 in ignored member", "{\"odata.x\":\"\xff\"}", nil, ErrInvalidInput},
		{"overlong NUL", "{\"a\":\"\xc0\x80\"}", nil, ErrInvalidInput},
		{"UTF-8 surrogate", "{\"a\":\"\xed\xa0\x80\"}", nil, ErrInvalidInput},
		{"truncated UTF-8", "{\"a\":\"\xe6\x97\"}", nil, ErrInvalidInput},
		{"invalid UTF-8 outside strings", "{\"a\":1\xff}", nil, ErrInvalidInput},
		{"raw control in string", "{\"a\":\"x\ty\"}", nil, ErrInvalidInput},
		{"raw NUL in string", "{\"a\":\"x\x00y\"}", nil, ErrInvalidInput},
		{"deeply nested ignored", `{"odata.x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, nil, ErrInvalidInput},
		{"nested ignored ok", `{"odata.x":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `,"a":1}`, []Property{prop("a", vI32(1))}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			eb, err := DecodeEntity([]byte(tt.body))
			if !checkErr(t, err, tt.err) {
				return
			}
			if !sameProps(eb.Properties, tt.want) {
				t.Errorf("properties\n got %s\nwant %s", showProps(eb.Properties), showProps(tt.want))
			}
		})
	}
}

// manyMembers returns n distinct members p0..p(n-1), each annotated, the
// annotations placed away from their values.
func manyMembers(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":"%d"`, i, i)
	}
	for i := range n {
		fmt.Fprintf(&b, `,"p%d@odata.type":"Edm.Int64"`, i)
	}
	return b.String()
}

func TestDecodeEntityManyMembersPairing(t *testing.T) {
	t.Parallel()
	eb, err := DecodeEntity([]byte(`{` + manyMembers(100) + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(eb.Properties) != 100 {
		t.Fatalf("got %d properties", len(eb.Properties))
	}
	for i, p := range eb.Properties {
		if want := prop(fmt.Sprintf("p%d", i), vI64(int64(i))); p.Name != want.Name || !sameValue(p.Value, want.Value) {
			t.Fatalf("property %d = %s, want %s", i, showProps([]Property{p}), showProps([]Property{want}))
		}
	}
}

func TestDecodeEntityKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		body         string
		pk, rk       string
		hasPK, hasRK bool
		err          error
	}{
		{"both", `{"PartitionKey":"p","RowKey":"r"}`, "p", "r", true, true, nil},
		{"none", `{"a":1}`, "", "", false, false, nil},
		{"empty keys", `{"PartitionKey":"","RowKey":""}`, "", "", true, true, nil},
		{"only pk", `{"PartitionKey":"p"}`, "p", "", true, false, nil},
		{"null pk is absent", `{"PartitionKey":null,"RowKey":"r"}`, "", "r", false, true, nil},
		{"python annotations after", `{"PartitionKey":"p","PartitionKey@odata.type":"Edm.String","RowKey":"r","RowKey@odata.type":"Edm.String"}`, "p", "r", true, true, nil},
		{"annotation before", `{"PartitionKey@odata.type":"Edm.String","PartitionKey":"p"}`, "p", "", true, false, nil},
		{"pk number", `{"PartitionKey":1,"RowKey":"r"}`, "", "", false, false, ErrInvalidInput},
		{"rk bool", `{"PartitionKey":"p","RowKey":true}`, "", "", false, false, ErrInvalidInput},
		{"pk object", `{"PartitionKey":{},"RowKey":"r"}`, "", "", false, false, ErrInvalidInput},
		{"pk int32 annotation", `{"PartitionKey@odata.type":"Edm.Int32","PartitionKey":"1"}`, "", "", false, false, ErrInvalidInput},
		{"pk unknown annotation", `{"PartitionKey@odata.type":"Edm.Foo","PartitionKey":"1"}`, "", "", false, false, ErrInvalidInput},
		{"key characters not checked here", `{"PartitionKey":"a/b#c?d\\e","RowKey":"\u0000\u007f"}`, "a/b#c?d\\e", "\x00\x7f", true, true, nil},
		{"go doubled quotes kept", `{"PartitionKey":"a''b","RowKey":"r"}`, "a''b", "r", true, true, nil},
		{"long key not checked here", `{"PartitionKey":"` + strings.Repeat("k", 2000) + `"}`, strings.Repeat("k", 2000), "", true, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			eb, err := DecodeEntity([]byte(tt.body))
			if !checkErr(t, err, tt.err) {
				return
			}
			if eb.PartitionKey != tt.pk || eb.RowKey != tt.rk || eb.HasPartitionKey != tt.hasPK || eb.HasRowKey != tt.hasRK {
				t.Errorf("got pk=%q(%v) rk=%q(%v), want pk=%q(%v) rk=%q(%v)",
					eb.PartitionKey, eb.HasPartitionKey, eb.RowKey, eb.HasRowKey, tt.pk, tt.hasPK, tt.rk, tt.hasRK)
			}
		})
	}
}

func TestDecodeEntityPropertyCount(t *testing.T) {
	t.Parallel()
	body := func(n, nulls int) []byte {
		var b strings.Builder
		b.WriteString(`{"PartitionKey":"p","RowKey":"r","Timestamp":"x"`)
		for i := range n {
			fmt.Fprintf(&b, `,"p%d":%d`, i, i)
		}
		for i := range nulls {
			fmt.Fprintf(&b, `,"n%d":null`, i)
		}
		b.WriteByte('}')
		return []byte(b.String())
	}
	tests := []struct {
		name     string
		n, nulls int
		err      error
	}{
		{"252", 252, 0, nil},
		{"253", 253, 0, ErrTooManyProperties},
		{"252 and nulls", 252, 10, nil},
		{"1000", 1000, 0, ErrTooManyProperties},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			eb, err := DecodeEntity(body(tt.n, tt.nulls))
			if checkErr(t, err, tt.err) && len(eb.Properties) != tt.n {
				t.Errorf("got %d properties, want %d", len(eb.Properties), tt.n)
			}
		})
	}
}

// TestDecodeEntityPythonBody is the live-recorded Python request of
// rest-protocol.md §4.5: every annotation after its value.
func TestDecodeEntityPythonBody(t *testing.T) {
	t.Parallel()
	body := `{"PartitionKey":"pk7b0a2aca","PartitionKey@odata.type":"Edm.String","RowKey":"rk7b0a2aca","RowKey@odata.type":"Edm.String",
 "age":39,"sex":"male","married":true,"deceased":false,"ratio":3.1,"ratio@odata.type":"Edm.Double",
 "evenratio":3.0,"evenratio@odata.type":"Edm.Double","large":933311100,
 "Birthday":"1973-10-04T00:00:00.000000Z","Birthday@odata.type":"Edm.DateTime",
 "binary":"YmluYXJ5","binary@odata.type":"Edm.Binary","other":20,
 "clsid":"c9da6455-213d-42c9-9a79-3e9149a57833","clsid@odata.type":"Edm.Guid","none":null,"none@odata.type":"Edm.String"}`
	eb, err := DecodeEntity([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	birthday, _ := ParseDateTime("1973-10-04T00:00:00Z")
	want := []Property{
		prop("age", vI32(39)), prop("sex", vStr("male")), prop("married", vBool(true)), prop("deceased", vBool(false)),
		prop("ratio", vDbl(3.1)), prop("evenratio", vDbl(3)), prop("large", vI32(933311100)),
		prop("Birthday", vDT(birthday)), prop("binary", vBin([]byte("binary"))), prop("other", vI32(20)),
		prop("clsid", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833")),
	}
	if eb.PartitionKey != "pk7b0a2aca" || eb.RowKey != "rk7b0a2aca" || !sameProps(eb.Properties, want) {
		t.Errorf("got %q %q %s\nwant %s", eb.PartitionKey, eb.RowKey, showProps(eb.Properties), showProps(want))
	}

	// Encoded back in minimal metadata, it must be the response Azure
	// gave (rest-protocol.md §4.5), Timestamp and ETag aside.
	e := Entity{PartitionKey: eb.PartitionKey, RowKey: eb.RowKey, Properties: eb.Properties,
		ETag: `W/"datetime'2021-09-21T00%3A52%3A39.2839087Z'"`}
	e.Timestamp, _ = ParseDateTime("2021-09-21T00:52:39.2839087Z")
	enc := Encoder{Format: MinimalMetadata, ServiceURL: "https://acct.table.core.windows.net", Account: "acct", Table: "uttable7b0a2aca"}
	got := string(enc.AppendEntity(nil, &e))
	wantJSON := `{"odata.metadata":"https://acct.table.core.windows.net/$metadata#uttable7b0a2aca/@Element",` +
		`"odata.etag":"W/\"datetime'2021-09-21T00%3A52%3A39.2839087Z'\"",` +
		`"PartitionKey":"pk7b0a2aca","RowKey":"rk7b0a2aca","Timestamp":"2021-09-21T00:52:39.2839087Z",` +
		`"age":39,"sex":"male","married":true,"deceased":false,"ratio":3.1,"evenratio":3.0,"large":933311100,` +
		`"Birthday@odata.type":"Edm.DateTime","Birthday":"1973-10-04T00:00:00Z",` +
		`"binary@odata.type":"Edm.Binary","binary":"YmluYXJ5","other":20,` +
		`"clsid@odata.type":"Edm.Guid","clsid":"c9da6455-213d-42c9-9a79-3e9149a57833"}`
	if got != wantJSON {
		t.Errorf("encoded\n got %s\nwant %s", got, wantJSON)
	}
}

// TestDecodeEntityGoEDMEntity decodes what aztables.EDMEntity marshals:
// a sorted map, so annotations follow their values and need not be next
// to them, and keys with doubled quotes.
func TestDecodeEntityGoEDMEntity(t *testing.T) {
	t.Parallel()
	when := time.Date(2024, 1, 2, 3, 4, 5, 123456700, time.UTC)
	ent := aztables.EDMEntity{
		Entity: aztables.Entity{PartitionKey: "p'1", RowKey: "r/ 1?#é"},
		Properties: map[string]any{
			"Big":    aztables.EDMInt64(math.MinInt64),
			"Big0":   int32(7),
			"When":   aztables.EDMDateTime(when),
			"Photo":  aztables.EDMBinary(allBytes()),
			"Code":   aztables.EDMGUID("C9DA6455-213D-42C9-9A79-3E9149A57833"),
			"Name":   "<tag> & \u2028",
			"Float":  2.5,
			"Whole":  1.0, // json.Marshal writes 1: it becomes an Int32, as on Azure
			"Active": true,
		},
	}
	body, err := json.Marshal(ent)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := DecodeEntity(body)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if eb.PartitionKey != "p''1" || eb.RowKey != "r/ 1?#é" {
		t.Errorf("keys %q %q", eb.PartitionKey, eb.RowKey)
	}
	want := map[string]Value{
		"Big":    vI64(math.MinInt64),
		"Big0":   vI32(7),
		"When":   vDT(Ticks(when)),
		"Photo":  vBin(allBytes()),
		"Code":   vGuid("c9da6455-213d-42c9-9a79-3e9149a57833"),
		"Name":   vStr("<tag> & \u2028"),
		"Float":  vDbl(2.5),
		"Whole":  vI32(1),
		"Active": vBool(true),
	}
	if len(eb.Properties) != len(want) {
		t.Fatalf("got %s", showProps(eb.Properties))
	}
	for _, p := range eb.Properties {
		if w, ok := want[p.Name]; !ok || !sameValue(p.Value, w) {
			t.Errorf("%s = %s, want %s", p.Name, showValue(p.Value), showValue(w))
		}
	}
}

// TestDecodeEntityFreshStrings checks that decoded text does not alias the
// request body, which the HTTP layer reuses.
func TestDecodeEntityFreshStrings(t *testing.T) {
	t.Parallel()
	body := []byte(`{"PartitionKey":"pk","RowKey":"rk","Name":"value","G@odata.type":"Edm.Guid","G":"c9da6455-213d-42c9-9a79-3e9149a57833"}`)
	eb, err := DecodeEntity(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'X'
	}
	want := []Property{prop("Name", vStr("value")), prop("G", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833"))}
	if eb.PartitionKey != "pk" || eb.RowKey != "rk" || !sameProps(eb.Properties, want) {
		t.Errorf("after overwriting the body: %q %q %s", eb.PartitionKey, eb.RowKey, showProps(eb.Properties))
	}
}

func TestDecodeEntityErrorMentionsOffset(t *testing.T) {
	t.Parallel()
	_, err := DecodeEntity([]byte(`{"a":1,"b":x}`))
	if err == nil || !strings.Contains(err.Error(), "offset 11") {
		t.Errorf("error %v does not give offset 11", err)
	}
}

func TestDecodeTableName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
		err              error
	}{
		{"plain", `{"TableName":"mytable"}`, "mytable", nil},
		{"other members ignored", `{"odata.type":"x","TableName":"t1","throughput":{"a":[1,2]},"TableName@odata.type":"Edm.String"}`, "t1", nil},
		{"not validated here", `{"TableName":"1-bad"}`, "1-bad", nil},
		{"escaped", `{"TableName":"\u0061bc"}`, "abc", nil},
		{"missing", `{"Name":"t"}`, "", ErrPropertiesNeedValue},
		{"empty object", `{}`, "", ErrPropertiesNeedValue},
		{"null", `{"TableName":null}`, "", ErrPropertiesNeedValue},
		{"number", `{"TableName":5}`, "", ErrInvalidInput},
		{"object", `{"TableName":{}}`, "", ErrInvalidInput},
		{"duplicate", `{"TableName":"a","TableName":"b"}`, "", ErrDuplicateProperties},
		{"case matters", `{"tablename":"a"}`, "", ErrPropertiesNeedValue},
		{"invalid JSON", `{"TableName":"a"`, "", ErrInvalidInput},
		{"trailing data", `{"TableName":"a"} x`, "", ErrInvalidInput},
		{"empty body", ``, "", ErrInvalidInput},
		{"invalid UTF-8", "{\"TableName\":\"a\xff\"}", "", ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := DecodeTableName([]byte(tt.body))
			if checkErr(t, err, tt.err) && got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
