// Package console serves the web console: a single-page application,
// embedded in the binary, that browses, queries and edits tables through
// the public Table REST API of the server it is served by.
//
// The page is just another client. It signs each request in the browser
// with the account key (Shared Key) or carries a SAS, so the server keeps
// no session for it and no key crosses the wire. Signing is done in plain
// JavaScript rather than WebCrypto because WebCrypto exists only in secure
// contexts, and the console must work over plain http from any address.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy confines the page to its own scripts and styles
// and to requests to its own origin, unless the operator signs in to
// another endpoint (connect-src then needs that origin's CORS rules, and
// the browser's own policy applies: https: is allowed for such endpoints).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self' https: http:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Handler returns the console's handler. It expects paths relative to the
// console's root ("/", "/js/app.js"): mount it under a prefix with
// http.StripPrefix.
func Handler() http.Handler {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		// The assets change with the binary; revalidating is cheap
		// (Last-Modified is the build's, ETag-less) and keeps an upgraded
		// server from running an old page.
		h.Set("Cache-Control", "no-cache")
		// Views live in the URL's fragment, so only the files exist; no
		// directory is listed.
		p := path.Clean("/" + r.URL.Path)
		if p != "/" {
			if st, err := fs.Stat(root, strings.TrimPrefix(p, "/")); err != nil || st.IsDir() {
				http.NotFound(w, r)
				return
			}
		}
		files.ServeHTTP(w, r)
	})
}
