package httpapi

import (
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestHeaderValueKeysAreCanonical keeps headerValue's callers honest: a
// key not in canonical form would never be found.
func TestHeaderValueKeysAreCanonical(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	call := regexp.MustCompile(`headerValue\([^,()]+(?:\(\))?[^,()]*, "([^"]*)"\)`)
	found := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllSubmatch(src, -1) {
			found++
			if k := string(m[1]); textproto.CanonicalMIMEHeaderKey(k) != k {
				t.Errorf("%s: headerValue key %q is not canonical (%q)", f, k, textproto.CanonicalMIMEHeaderKey(k))
			}
		}
	}
	if found < 10 {
		t.Fatalf("found %d calls of headerValue; the pattern no longer matches them", found)
	}
}

func TestHeaderValueIsGet(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("x-ms-date", "d")
	h.Add("If-Match", "a")
	h.Add("If-Match", "b")
	for _, k := range []string{"X-Ms-Date", "If-Match", "Accept"} {
		if got, want := headerValue(h, k), h.Get(k); got != want {
			t.Errorf("headerValue(%q) = %q, Get gives %q", k, got, want)
		}
	}
}
