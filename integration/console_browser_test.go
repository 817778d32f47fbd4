package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/pgtables/pgtables/console"
	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/store"
)

// The console's end-to-end tests drive Debian's Chromium, headless, with
// chromedp. Without a Chromium they pass with a log line, unless
// PGTABLES_REQUIRE_CHROMIUM is set, as CI (.ci/run) sets it.
//
// PGTABLES_CONSOLE_SCREENSHOTS=<dir> saves the screenshots the README
// shows; a failing test saves one of the page as it was (see the log).

// chromiumPath finds the browser: $PGTABLES_CHROMIUM, else on $PATH.
func chromiumPath() string {
	if p := os.Getenv("PGTABLES_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// page is one browser tab on a console served by e.
type page struct {
	t         *testing.T
	e         *env
	ctx       context.Context
	downloads string
}

// newConsoleEnv starts pgtables with its console on a fresh schema.
func newConsoleEnv(t *testing.T) *env {
	t.Helper()
	return newEnvConfig(t, store.Options{}, httpapi.Config{Version: "test", Console: console.Handler()})
}

// newPage starts a headless Chromium of its own (own profile, so its
// storage is its own) at width x height, or returns nil when there is no
// Chromium and the test may pass without one.
func newPage(t *testing.T, e *env, width, height int, extra ...chromedp.ExecAllocatorOption) *page {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		missingClient(t, "PGTABLES_REQUIRE_CHROMIUM", "chromium is not installed")
		return nil
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	quiet := func(string, ...any) {}
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(quiet), chromedp.WithErrorf(quiet))
	ctx, cancelTime := context.WithTimeout(ctx, 4*time.Minute)
	p := &page{t: t, e: e, ctx: ctx, downloads: t.TempDir()}
	t.Cleanup(func() {
		if t.Failed() {
			p.saveFailure()
		}
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	allow := true
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: p.downloads, EventsEnabled: &allow,
	}); err != nil {
		t.Fatalf("set download behaviour: %v", err)
	}
	return p
}

// saveFailure saves a screenshot of the page for a failed test.
func (p *page) saveFailure() {
	buf, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		p.t.Logf("no screenshot of the failure: %v", err)
		return
	}
	dir := os.Getenv("PGTABLES_TEST_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	name := filepath.Join(dir, "pgtables-console-"+regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(p.t.Name(), "-")+".png")
	if err := os.WriteFile(name, buf, 0o644); err != nil {
		p.t.Logf("no screenshot of the failure: %v", err)
		return
	}
	p.t.Logf("screenshot of the failure: %s", name)
}

// shot saves a screenshot for the README when PGTABLES_CONSOLE_SCREENSHOTS
// names a directory.
func (p *page) shot(name string) {
	dir := os.Getenv("PGTABLES_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// do runs steps, failing the test on an error.
func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("browser: %v (message shown: %q)", err, p.messageNow())
	}
}

// open loads the console at view (a fragment such as "#/tables").
func (p *page) open(view string) {
	p.t.Helper()
	p.do(chromedp.Navigate(p.e.baseURL+"/-/console/"+view), chromedp.WaitReady(chromedp.CSS("#view")))
}

func (p *page) click(sel string) {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.CSS(sel)))
}

// set gives a form field a value as if typed, firing input and change.
func (p *page) set(sel, value string) {
	p.t.Helper()
	p.eval(fmt.Sprintf(`(() => { const el = document.querySelector(%s);
		if (!el) throw new Error('no element ' + %[1]s);
		el.value = %s; el.dispatchEvent(new Event('input', {bubbles: true}));
		el.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`, jsString(sel), jsString(value)))
}

// eval evaluates a JavaScript expression in the page; the result as JSON.
func (p *page) eval(expr string) json.RawMessage {
	p.t.Helper()
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate: %v", err)
	}
	return raw
}

// text returns the text of the first element sel finds ("" when none).
func (p *page) text(sel string) string {
	p.t.Helper()
	var s string
	if err := json.Unmarshal(p.eval(fmt.Sprintf(`document.querySelector(%s)?.textContent ?? ''`, jsString(sel))), &s); err != nil {
		p.t.Fatal(err)
	}
	return s
}

// messageNow is the status line's text, without failing.
func (p *page) messageNow() string {
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('#message')?.textContent ?? ''`))
	if err != nil {
		return ""
	}
	return raw
}

// waitText waits until the text of sel contains want. It gives up when
// the text has not changed for 30 s: a text that keeps changing shows
// progress (a long deletion counting up on a loaded machine), not a stall.
func (p *page) waitText(sel, want string) string {
	p.t.Helper()
	deadline, last := time.Now().Add(30*time.Second), ""
	for {
		got := p.text(sel)
		if strings.Contains(got, want) {
			return got
		}
		if got != last {
			deadline, last = time.Now().Add(30*time.Second), got
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s shows %q, want it to contain %q (message: %q)", sel, got, want, p.messageNow())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// count returns how many elements sel finds.
func (p *page) count(sel string) int {
	p.t.Helper()
	var n int
	if err := json.Unmarshal(p.eval(fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel))), &n); err != nil {
		p.t.Fatal(err)
	}
	return n
}

// signInWithKey signs in as the development account by name and key.
func (p *page) signInWithKey() {
	p.t.Helper()
	p.open("#/signin")
	p.set("#key-name", httpapi.DevAccount)
	p.set("#key-key", httpapi.DevKey)
	p.click("#signin-key button[type=submit]")
	p.waitText("#message", "Signed in to "+httpapi.DevAccount)
	p.do(chromedp.WaitVisible(chromedp.CSS("#tables")))
}

// signedInPage is a page of its own at 1280x800, signed in with the
// development account's key; nil without a Chromium (see newPage).
func signedInPage(t *testing.T, e *env) *page {
	t.Helper()
	p := newPage(t, e, 1280, 800)
	if p != nil {
		p.signInWithKey()
	}
	return p
}

// download waits for the file name in the page's download directory.
func (p *page) download(name string) []byte {
	p.t.Helper()
	path := filepath.Join(p.downloads, name)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(p.downloads)
			p.t.Fatalf("no download %s (directory holds %v)", name, entries)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// consoleSizes are the screens every console test runs at: a phone (at
// its device pixel ratio) and a laptop.
var consoleSizes = []struct {
	name  string
	w, h  int
	scale float64
}{{"390x844", 390, 844, 3}, {"1280x800", 1280, 800, 1}}

// atSizes runs f in a subtest at each of consoleSizes, each with a
// Chromium of its own, signed in when signIn is set. The subtests run one
// after the other so that what one measures does not share the CPU with
// the other.
func atSizes(t *testing.T, e *env, signIn bool, f func(t *testing.T, p *page)) {
	t.Helper()
	for _, s := range consoleSizes {
		t.Run(s.name, func(t *testing.T) {
			p := newPage(t, e, s.w, s.h)
			if p == nil {
				return
			}
			p.do(chromedp.EmulateViewport(int64(s.w), int64(s.h), chromedp.EmulateScale(s.scale)))
			if signIn {
				p.signInWithKey()
			}
			f(t, p)
		})
	}
}

// renderTime clicks sel and returns the milliseconds from the moment the
// page holds the answer to its entity query (the body read) to the frame
// after the first one at which #loaded-count shows want: the rows are in
// the DOM, laid out and painted. The page's code is not involved, so the
// same measurement runs on any version of it.
func (p *page) renderTime(sel, want string) float64 {
	p.t.Helper()
	p.eval(fmt.Sprintf(`(() => {
		const want = %s;
		const read = Response.prototype.text;
		let t0 = 0;
		Response.prototype.text = function () {
			const r = read.call(this);
			if (/\(\)(\?|$)/.test(this.url)) r.then(() => { t0 = performance.now(); });
			return r;
		};
		window.__rendered = new Promise((resolve) => {
			const tick = () => {
				if (t0 && (document.querySelector('#loaded-count')?.textContent ?? '').includes(want)) {
					Response.prototype.text = read;
					// The frame after: this one's layout and paint are done.
					requestAnimationFrame(() => resolve(performance.now() - t0));
				} else requestAnimationFrame(tick);
			};
			requestAnimationFrame(tick);
		});
		return true; })()`, jsString(want)))
	p.click(sel)
	var ms float64
	if err := json.Unmarshal(p.eval(`window.__rendered`), &ms); err != nil {
		p.t.Fatal(err)
	}
	return ms
}
