package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// opsServer serves a Server without a store over real HTTP (net/http's
// handling of HEAD is part of what is tested), with a console of one page
// when console is set, and the readiness check ready; with none, it has
// not started serving the protocol, as before its migrations ran.
func opsServer(t *testing.T, console bool, ready func(context.Context) error) string {
	t.Helper()
	cfg := Config{Version: "test"}
	if console {
		cfg.Console = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, "<!doctype html><title>console</title>\n")
		})
	}
	srv := New(cfg, nil, slog.New(slog.DiscardHandler), ready)
	if ready != nil {
		srv.StartServing() // else: as at start, before the migrations
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs.URL
}

// noRedirect is a client that shows redirects rather than following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func send(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// HEAD of every unauthenticated endpoint answers as GET does, status and
// headers, without the body: probes that use HEAD see what GET shows.
func TestOpsEndpointsAnswerHeadAsGet(t *testing.T) {
	t.Parallel()
	up := opsServer(t, true, func(context.Context) error { return nil })
	down := opsServer(t, true, func(context.Context) error { return errors.New("no database") })
	for _, tc := range []struct {
		base, path string
		status     int
	}{
		{up, "/-/healthy", 200},
		{up, "/-/live", 200},
		{up, "/-/ready", 200},
		{down, "/-/ready", 503},
		{down, "/-/healthy", 200},
		{up, "/-/metrics", 200},
		{up, "/-/console/", 200},
		{up, "/-/console", 301},
		{up, "/-/console/missing.js", 404},
	} {
		get, getBody := send(t, "GET", tc.base+tc.path)
		head, headBody := send(t, "HEAD", tc.base+tc.path)
		if get.StatusCode != tc.status || head.StatusCode != tc.status {
			t.Errorf("%s: GET %d, HEAD %d, want %d", tc.path, get.StatusCode, head.StatusCode, tc.status)
		}
		if headBody != "" || (tc.status == 200 && getBody == "") {
			t.Errorf("%s: GET body %q, HEAD body %q", tc.path, getBody, headBody)
		}
		for _, h := range []string{"Content-Type", "Location"} {
			if get.Header.Get(h) != head.Header.Get(h) {
				t.Errorf("%s: %s: GET %q, HEAD %q", tc.path, h, get.Header.Get(h), head.Header.Get(h))
			}
		}
		// Metrics change between two requests; the others' length is
		// what GET sends (net/http writes none of 0 for HEAD: it cannot
		// tell an empty body from one not written).
		if tc.path != "/-/metrics" && getBody != "" && head.Header.Get("Content-Length") != get.Header.Get("Content-Length") {
			t.Errorf("%s: Content-Length: GET %q, HEAD %q", tc.path, get.Header.Get("Content-Length"), head.Header.Get("Content-Length"))
		}
	}
}

// Under /-/, a path that names nothing is 404 (the console's too when it
// is switched off) and a method other than GET and HEAD is 405 with
// Allow, whatever the method: not the protocol's 400 InvalidUri or 403.
func TestOpsUnknownPathsAndMethods(t *testing.T) {
	t.Parallel()
	ready := func(context.Context) error { return nil }
	on := opsServer(t, true, ready)
	off := opsServer(t, false, ready)
	for _, tc := range []struct {
		base, method, path string
		status             int
	}{
		{off, "GET", "/-/console/", 404},
		{off, "HEAD", "/-/console/", 404},
		{off, "GET", "/-/console", 404},
		{off, "GET", "/-/console/js/app.js", 404},
		{off, "POST", "/-/console/", 404},
		{on, "GET", "/-/nothing", 404},
		{on, "HEAD", "/-/nothing", 404},
		{on, "DELETE", "/-/nothing", 404},
		{on, "GET", "/-/", 404},
		{on, "GET", "/-/ready/x", 404},
		{on, "GET", "/-/consolex", 404},
		{on, "POST", "/-/ready", 405},
		{on, "PUT", "/-/healthy", 405},
		{on, "DELETE", "/-/live", 405},
		{on, "MERGE", "/-/metrics", 405},
		{on, "OPTIONS", "/-/ready", 405},
		{on, "PATCH", "/-/console", 405},
		{on, "POST", "/-/console/", 405},
		{off, "POST", "/-/healthy", 405},
	} {
		resp, body := send(t, tc.method, tc.base+tc.path)
		name := tc.method + " " + tc.path
		if tc.base == off {
			name += " (console off)"
		}
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %q, want %d", name, resp.StatusCode, body, tc.status)
		}
		if allow := resp.Header.Get("Allow"); (tc.status == 405) != (allow == "GET, HEAD") {
			t.Errorf("%s: Allow %q", name, allow)
		}
		if code := resp.Header.Get("x-ms-error-code"); code != "" || strings.Contains(body, "InvalidUri") {
			t.Errorf("%s: the protocol's error %q %q", name, code, body)
		}
	}
}
