package httpapi

import (
	"regexp"
	"testing"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestRequestIDsAreDistinctUUIDs(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 10000 {
		id := newRequestID()
		if !uuidV4.MatchString(id) {
			t.Fatalf("request id %q is not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("request id %q given twice", id)
		}
		seen[id] = true
	}
}

func BenchmarkRequestID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = newRequestID()
	}
}
