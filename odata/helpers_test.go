package odata

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// sameValue compares values exactly: doubles by bits (so -0 and NaN
// count), byte slices by content.
func sameValue(a, b Value) bool {
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case EdmString, EdmGuid:
		return a.Str == b.Str
	case EdmInt32, EdmInt64, EdmDateTime:
		return a.Int == b.Int
	case EdmDouble:
		return math.Float64bits(a.Float) == math.Float64bits(b.Float) ||
			math.IsNaN(a.Float) && math.IsNaN(b.Float)
	case EdmBoolean:
		return a.Bool == b.Bool
	case EdmBinary:
		return bytes.Equal(a.Bytes, b.Bytes)
	}
	return false
}

func showValue(v Value) string {
	switch v.Type {
	case EdmString, EdmGuid:
		return fmt.Sprintf("%s(%q)", v.Type, v.Str)
	case EdmInt32, EdmInt64:
		return fmt.Sprintf("%s(%d)", v.Type, v.Int)
	case EdmDateTime:
		return fmt.Sprintf("%s(%s)", v.Type, FormatDateTime(v.Int))
	case EdmDouble:
		return fmt.Sprintf("%s(%v/%#x)", v.Type, v.Float, math.Float64bits(v.Float))
	case EdmBoolean:
		return fmt.Sprintf("%s(%v)", v.Type, v.Bool)
	case EdmBinary:
		return fmt.Sprintf("%s(%x)", v.Type, v.Bytes)
	}
	return fmt.Sprintf("Value(%d)", v.Type)
}

func showProps(ps []Property) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", p.Name, showValue(p.Value))
	}
	return "[" + b.String() + "]"
}

func sameProps(a, b []Property) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !sameValue(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// checkErr reports whether err matches the wanted sentinel (nil: no error)
// and, for errors, that it carries a client-facing detail.
func checkErr(t *testing.T, err, want error) bool {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("unexpected error: %v", err)
			return false
		}
		return true
	}
	if !errors.Is(err, want) {
		t.Errorf("error = %v, want %v", err, want)
		return false
	}
	var de *DetailError
	if !errors.As(err, &de) || de.Detail == "" {
		t.Errorf("error %v carries no detail", err)
	}
	return false
}

// Value constructors for tables of expectations.
func vStr(s string) Value             { return Value{Type: EdmString, Str: s} }
func vI32(i int64) Value              { return Value{Type: EdmInt32, Int: i} }
func vI64(i int64) Value              { return Value{Type: EdmInt64, Int: i} }
func vDbl(f float64) Value            { return Value{Type: EdmDouble, Float: f} }
func vBool(b bool) Value              { return Value{Type: EdmBoolean, Bool: b} }
func vDT(ticks int64) Value           { return Value{Type: EdmDateTime, Int: ticks} }
func vGuid(s string) Value            { return Value{Type: EdmGuid, Str: s} }
func vBin(b []byte) Value             { return Value{Type: EdmBinary, Bytes: b} }
func prop(n string, v Value) Property { return Property{Name: n, Value: v} }

// allBytes is every byte value once.
func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// sampleProps has every type and the awkward values of each.
func sampleProps() []Property {
	return []Property{
		prop("S", vStr("héllo \"world\" \\ / \n\t日本😀")),
		prop("Nul", vStr("a\x00b\x01c\x02\x00\x01")),
		prop("Ctl", vStr("\x1f\x7f\u0085\u2028")),
		prop("Empty", vStr("")),
		prop("I32min", vI32(math.MinInt32)),
		prop("I32max", vI32(math.MaxInt32)),
		prop("I64min", vI64(math.MinInt64)),
		prop("I64max", vI64(math.MaxInt64)),
		prop("I64js", vI64(9007199254740993)),
		prop("D01", vDbl(0.1)),
		prop("Dtiny", vDbl(-1.5e-300)),
		prop("Dmax", vDbl(math.MaxFloat64)),
		prop("Dfive", vDbl(5)),
		prop("Dnegzero", vDbl(math.Copysign(0, -1))),
		prop("Dsub", vDbl(5e-324)),
		prop("DNaN", vDbl(math.NaN())),
		prop("DInf", vDbl(math.Inf(1))),
		prop("DNegInf", vDbl(math.Inf(-1))),
		prop("BT", vBool(true)),
		prop("BF", vBool(false)),
		prop("DTmin", vDT(MinDateTime)),
		prop("DTmax", vDT(MaxDateTime)),
		prop("DTfrac", vDT(MinDateTime+1)),
		prop("G", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833")),
		prop("Bin", vBin(allBytes())),
		prop("BinEmpty", vBin([]byte{})),
	}
}

func timeOf(v interface{ MarshalText() ([]byte, error) }) time.Time {
	b, _ := v.MarshalText()
	t, _ := time.Parse(time.RFC3339Nano, string(b))
	return t
}
