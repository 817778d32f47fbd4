package odata

import (
	"strings"
	"testing"
)

func TestParseGuid(t *testing.T) {
	t.Parallel()
	const canon = "c9da6455-213d-42c9-9a79-3e9149a57833"
	tests := []struct {
		in string
		ok bool
	}{
		{canon, true},
		{strings.ToUpper(canon), true},
		{"{" + canon + "}", true},
		{"{" + canon, false},
		{canon[:35], false},
		{canon + "0", false},
		{strings.ReplaceAll(canon, "-", ""), false},
		{"c9da6455-213d-42c9-9a79_3e9149a57833", false},
		{"g9da6455-213d-42c9-9a79-3e9149a57833", false},
		{"", false},
	}
	for _, tt := range tests {
		got, ok := ParseGuid(tt.in)
		if ok != tt.ok || ok && got != canon {
			t.Errorf("ParseGuid(%q) = %q, %v", tt.in, got, ok)
		}
		dst, ok := appendGuid([]byte("x"), []byte(tt.in))
		if ok != tt.ok || ok && string(dst) != "x"+canon || !ok && string(dst) != "x" {
			t.Errorf("appendGuid(%q) = %q, %v", tt.in, dst, ok)
		}
	}
}

func TestUTF16Len(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int{"": 0, "abc": 3, "é": 1, "日本": 2, "😀": 2, "a😀é": 4} {
		if got := UTF16Len(s); got != want {
			t.Errorf("UTF16Len(%q) = %d, want %d", s, got, want)
		}
		if got := utf16Len([]byte(s)); got != want {
			t.Errorf("utf16Len([]byte(%q)) = %d, want %d", s, got, want)
		}
	}
}
