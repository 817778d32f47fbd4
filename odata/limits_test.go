package odata

import (
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		ok          bool
	}{
		{"empty", "", true},
		{"plain", "abc", true},
		{"allowed punctuation", " -_.@:'!$%&()*+,;=[]{}~`^|<>\"", true},
		{"non-ASCII", "ü日😀", true},
		{"U+00A0 and beyond", "\u00a0\u00ff\ufffd", true},
		{"512 units", strings.Repeat("k", 512), true},
		{"513 units", strings.Repeat("k", 513), false},
		{"512 units of pairs", strings.Repeat("😀", 256), true},
		{"514 units of pairs", strings.Repeat("😀", 257), false},
		{"512 BMP non-ASCII", strings.Repeat("日", 512), true},
		{"slash", "a/b", false},
		{"backslash", `a\b`, false},
		{"hash", "a#b", false},
		{"question mark", "a?b", false},
		{"tab", "a\tb", false},
		{"LF", "a\nb", false},
		{"CR", "a\rb", false},
		{"U+0000", "a\x00b", false},
		{"U+0001", "\x01", false},
		{"U+001F", "\x1f", false},
		{"U+007F", "\x7f", false},
		{"U+0080", "\u0080", false},
		{"U+0085", "x\u0085", false},
		{"U+009F", "\u009f", false},
		{"invalid UTF-8", "a\xffb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, which := range []string{"PartitionKey", "RowKey"} {
				err := ValidateKey(which, tt.value)
				if tt.ok {
					checkErr(t, err, nil)
					continue
				}
				if checkErr(t, err, ErrOutOfRangeInput); err != nil && !strings.Contains(err.Error(), "The '"+which+"' parameter of value '") {
					t.Errorf("message %q", err)
				}
			}
		})
	}
}

func TestValidateKeyMessageTruncated(t *testing.T) {
	t.Parallel()
	err := ValidateKey("RowKey", strings.Repeat("日", 600))
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("error %q", err)
	}
}

func TestEntitySize(t *testing.T) {
	t.Parallel()
	props := []Property{
		prop("S", vStr("ab😀")),        // 8 + 2 + 4 + 2*4
		prop("B", vBin([]byte{1, 2})), // 8 + 2 + 4 + 2
		prop("T", vBool(true)),        // 8 + 2 + 1
		prop("I", vI32(1)),            // 8 + 2 + 4
		prop("L", vI64(1)),            // 8 + 2 + 8
		prop("D", vDbl(1)),            // 8 + 2 + 8
		prop("W", vDT(MinDateTime)),   // 8 + 2 + 8
		prop("G", vGuid("c9da6455-213d-42c9-9a79-3e9149a57833")), // 8 + 2 + 16
	}
	wantProps := 22 + 16 + 11 + 14 + 18 + 18 + 18 + 26
	if got := PropertiesSize(props); got != wantProps {
		t.Errorf("PropertiesSize = %d, want %d", got, wantProps)
	}
	if got, want := EntitySize("pk", "日😀", props), 4+2*(2+3)+wantProps; got != want {
		t.Errorf("EntitySize = %d, want %d", got, want)
	}
	if got := EntitySize("", "", nil); got != 4 {
		t.Errorf("empty EntitySize = %d", got)
	}
}

func TestCheckEntity(t *testing.T) {
	t.Parallel()
	props := func(n int) []Property {
		ps := make([]Property, n)
		for i := range ps {
			ps[i] = prop("p", vI32(1))
		}
		return ps
	}
	// One string property whose entity size is exactly n bytes with
	// keys "p" and "r": 4 + 2*2 + 8 + 2*1 + 4 + 2*len.
	sized := func(n int) []Property {
		rest := n - (4 + 4 + 8 + 2 + 4)
		return []Property{prop("s", vStr(strings.Repeat("x", rest/2)))}
	}
	tests := []struct {
		name   string
		pk, rk string
		props  []Property
		err    error
	}{
		{"ok", "p", "r", props(3), nil},
		{"bad pk", "a/b", "r", nil, ErrOutOfRangeInput},
		{"bad rk", "p", "a\x00", nil, ErrOutOfRangeInput},
		{"long rk", "p", strings.Repeat("r", 513), nil, ErrOutOfRangeInput},
		{"252 properties", "p", "r", props(252), nil},
		{"253 properties", "p", "r", props(253), ErrTooManyProperties},
		{"exactly 1 MiB", "p", "r", sized(1 << 20), nil},
		{"1 MiB + 2", "p", "r", sized(1<<20 + 2), ErrEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkErr(t, CheckEntity(tt.pk, tt.rk, tt.props), tt.err)
		})
	}
	if got := EntitySize("p", "r", sized(1<<20)); got != 1<<20 {
		t.Fatalf("test helper sized: %d", got)
	}
}

func TestValidateTableName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
	}{
		{"abc", nil},
		{"MyTable1", nil},
		{"A" + strings.Repeat("b", 62), nil},
		{"A" + strings.Repeat("b", 63), ErrOutOfRangeInput},
		{"ab", ErrOutOfRangeInput},
		{"a", ErrOutOfRangeInput},
		{"", ErrOutOfRangeInput},
		{"1abc", ErrInvalidResourceName},
		{"1", ErrInvalidResourceName},
		{"ab-c", ErrInvalidResourceName},
		{"a_bc", ErrInvalidResourceName},
		{"a b", ErrInvalidResourceName},
		{"tabé", ErrInvalidResourceName},
		{"a-", ErrInvalidResourceName},
		{"a" + strings.Repeat("-", 70), ErrInvalidResourceName},
		{"tables", ErrInvalidInput},
		{"Tables", ErrInvalidInput},
		{"TABLES", ErrInvalidInput},
		{"tables1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkErr(t, ValidateTableName(tt.name), tt.err)
		})
	}
}
