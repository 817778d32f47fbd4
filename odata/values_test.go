package odata

import (
	"strings"
	"testing"
	"unicode/utf16"
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
	cases := []string{"", "abc", "é", "日本", "😀", "a😀é", "exactly8", "sixteen bytes!!!", "seventeen bytes!!"}
	// Each kind of character at every offset of the 8-byte words, in
	// strings long enough to take the word-at-a-time path and its tail.
	for _, ch := range []string{"é", "日", "😀", "\u0080", "\U0010FFFF"} {
		for pre := 0; pre < 17; pre++ {
			for post := 0; post < 9; post++ {
				cases = append(cases, strings.Repeat("a", pre)+ch+strings.Repeat("b", post))
			}
		}
		cases = append(cases, strings.Repeat(ch, 9), strings.Repeat("x"+ch, 7))
	}
	for _, s := range cases {
		want := len(utf16.Encode([]rune(s)))
		if got := UTF16Len(s); got != want {
			t.Errorf("UTF16Len(%q) = %d, want %d", s, got, want)
		}
		if got := utf16Len([]byte(s)); got != want {
			t.Errorf("utf16Len([]byte(%q)) = %d, want %d", s, got, want)
		}
		for _, limit := range []int{want - 1, want, len(s)} {
			if got := utf16Over(s, limit); got != (want > limit) {
				t.Errorf("utf16Over(%q, %d) = %v, want %v", s, limit, got, want > limit)
			}
		}
	}
}
