package httpapi

import (
	"net/http"
	"testing"
)

// writeJSON, created and writeNoContent set headers under their canonical
// keys directly; the headers on the wire must stay the ones Header.Set
// would have written.
func TestDirectHeaderKeysAreCanonical(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, key string }{
		{"DataServiceVersion", dataServiceVersionKey},
		{"DataServiceId", dataServiceIDKey},
		{"Preference-Applied", "Preference-Applied"},
		{"Location", "Location"},
		{"Content-Length", "Content-Length"},
	} {
		if got := http.CanonicalHeaderKey(tc.name); got != tc.key {
			t.Errorf("canonical key of %s %q, the server sets %q", tc.name, got, tc.key)
		}
	}
}
