package httpapi

import (
	"net/http"
	"testing"
)

// writeJSON sets DataServiceVersion under its canonical key directly; the
// header on the wire must stay the one Header.Set would have written.
func TestDataServiceVersionKeyIsCanonical(t *testing.T) {
	t.Parallel()
	if got := http.CanonicalHeaderKey("DataServiceVersion"); got != dataServiceVersionKey {
		t.Fatalf("canonical key %q, writeJSON uses %q", got, dataServiceVersionKey)
	}
}
