package console

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func TestHandlerServesAssets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, path string
		status       int
		contentType  string
	}{
		{"GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD", "/", 200, "text/html; charset=utf-8"},
		{"GET", "/console.css", 200, "text/css; charset=utf-8"},
		{"GET", "/js/app.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/js/none.js", 404, ""},
		{"GET", "/../console.go", 404, ""},
		{"GET", "/js/", 404, ""},
		{"POST", "/", 405, ""},
	} {
		resp := get(t, tc.method, tc.path)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.contentType != "" && resp.Header.Get("Content-Type") != tc.contentType {
			t.Errorf("%s %s: Content-Type %q, want %q", tc.method, tc.path, resp.Header.Get("Content-Type"), tc.contentType)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s %s: security headers missing: %v", tc.method, tc.path, resp.Header)
		}
	}
}

// TestAssetsReferenceOnlyEmbeddedFiles keeps the page whole: every file
// the page or a module names is embedded, and nothing is loaded from
// elsewhere (the policy would refuse it anyway).
func TestAssetsReferenceOnlyEmbeddedFiles(t *testing.T) {
	t.Parallel()
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"#:]+)"|from '\./([^']+)'`)
	err = fs.WalkDir(root, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".html") || strings.HasSuffix(path, ".js")) {
			return err
		}
		b, err := fs.ReadFile(root, path)
		if err != nil {
			return err
		}
		dir := strings.TrimSuffix(path, d.Name()) // "" or "js/"
		for _, m := range refs.FindAllStringSubmatch(string(b), -1) {
			ref := m[1]
			if m[2] != "" {
				ref = dir + m[2]
			}
			if _, err := fs.Stat(root, ref); err != nil {
				t.Errorf("%s names %s, which is not embedded", path, ref)
			}
		}
		if regexp.MustCompile(`https?://[a-z]`).Match(b) && path == "index.html" {
			t.Errorf("%s loads something from another site", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	resp := get(t, "GET", "/")
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `src="js/app.js"`) {
		t.Errorf("index.html does not load js/app.js")
	}
}
