package httpapi

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// opsAllow is what every operational endpoint answers: GET, and HEAD alike
// without the body, since probes and monitors use either.
const opsAllow = "GET, HEAD"

// serveOps answers every request under /-/, whatever its method, before
// the protocol's routing sees it: these paths are not Azure's, so an
// unknown one is a plain 404 and a wrong method a plain 405 with Allow,
// never the protocol's 400 InvalidUri or 403 of a request without a
// signature.
func (s *Server) serveOps(c echo.Context) error {
	w, r := c.Response(), c.Request()
	if strings.HasPrefix(r.URL.Path, indexesPrefix) {
		if isChangesPath(r.URL.Path) {
			return s.serveChanges(c) // changes.go
		}
		return s.serveIndexes(c) // authenticated, with methods of its own
	}
	h := s.opsHandler(r.URL.Path)
	switch {
	case h == nil:
		http.NotFound(w, r)
		return nil
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", opsAllow)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil
	}
	// For HEAD, net/http drops what the handler writes and keeps its
	// status and headers, Content-Length included.
	return h(c)
}

// opsHandler returns the handler of an operational endpoint, nil for a
// path that names none. /-/live is /-/healthy under the name that
// Kubernetes-style liveness probes expect.
func (s *Server) opsHandler(path string) echo.HandlerFunc {
	switch path {
	case "/-/healthy", "/-/live":
		return func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") }
	case "/-/ready":
		return s.handleReady
	case "/-/metrics":
		return s.handleMetrics
	}
	if s.cfg.Console == nil {
		return nil
	}
	if path == "/-/console" {
		return func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/-/console/") }
	}
	if strings.HasPrefix(path, "/-/console/") {
		return echo.WrapHandler(http.StripPrefix("/-/console", s.cfg.Console))
	}
	return nil
}
