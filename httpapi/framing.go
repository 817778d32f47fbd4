package httpapi

import (
	"net/http"

	"github.com/pgtables/pgtables/odata"
)

// A proxy or load balancer in front of pgtables and pgtables itself must
// agree on where a request ends and what it says, or a request hidden in
// another's body reaches pgtables unseen by the proxy (request smuggling,
// RFC 9112 §11.2). Go's server already refuses two different
// Content-Lengths; it reads a request that has both Content-Length and
// Transfer-Encoding by the latter, and hides that the former was there.
// Azure Storage takes request bodies with a Content-Length, and every SDK
// sends one, so pgtables refuses any Transfer-Encoding instead: with 400,
// before its body is read, which closes the connection (request.fail), so
// that nothing after it on the connection is ever run.

// singleHeaders are the headers that a signature covers or that say how to
// read the request: given twice, a proxy may read the one and pgtables the
// other.
var singleHeaders = []string{"Authorization", "X-Ms-Date", "Date", "X-Ms-Version", "Content-Type", "Content-Md5"}

// checkFraming refuses a request whose framing or signed headers a proxy
// could read otherwise than pgtables.
func checkFraming(r *http.Request) error {
	if len(r.TransferEncoding) > 0 {
		return odata.Detailf(errInvalidHeader, "Transfer-Encoding is not supported: send the body with a Content-Length.")
	}
	for _, name := range singleHeaders {
		if len(r.Header[name]) > 1 {
			return odata.Detailf(errInvalidHeader, "The header %s is given more than once.", name)
		}
	}
	return nil
}
