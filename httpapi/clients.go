package httpapi

import (
	"net/http"
	"strings"
)

// Where a client family's own defect leaves pgtables a choice between
// Azure's exact answer and one that the client reads correctly, the choice
// is made here, by the client's User-Agent.

// goSDK reports whether a request comes from the Go SDK (aztables). azcore
// writes its User-Agent as "azsdk-go-aztables/<version> (<go>; <os>)",
// after the application's id when it sets one.
//
// aztables v1.3.0 (and v1.4.1) has two defects that matter here:
//   - EDMEntity decodes a property annotated Edm.Double to nil, so the
//     annotation that gives every other SDK its whole-number Doubles back
//     would cost Go callers the value itself: they get the bare 5.0 that
//     Azure writes, which EDMEntity reads as Int32 (as from Azure).
//   - Its batches write key predicates without doubling the quotes in the
//     keys, so its batch operations are read with the lenient key rule.
func goSDK(h http.Header) bool {
	return strings.Contains(headerValue(h, "User-Agent"), "azsdk-go-aztables/")
}
