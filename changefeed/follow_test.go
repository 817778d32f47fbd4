package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtables/pgtables/tableapi"
)

const (
	devAccount = "devstoreaccount1"
	devKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// feed serves the contract's endpoint for one table from a list of
// changes: change i has cursor "c<i+1>", "c0" is before them all, and
// those before first have expired.
type feed struct {
	mu      sync.Mutex
	changes []map[string]any
	first   int
	added   chan struct{} // closed and renewed on each add
	// fail, if set, answers a request instead (true: answered).
	fail     func(w http.ResponseWriter, r *http.Request) bool
	requests []string // the queries asked
}

func newFeed(t *testing.T) (*feed, *Client) {
	t.Helper()
	f := &feed{added: make(chan struct{})}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	api, err := tableapi.NewClient(srv.URL+"/"+devAccount, devAccount, devKey)
	if err != nil {
		t.Fatal(err)
	}
	return f, NewClient(api, "T")
}

// add commits a transaction of one change per row key in partition pk.
func (f *feed) add(txn, op, pk string, rks ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, rk := range rks {
		c := map[string]any{"op": op, "txn": txn, "PartitionKey": pk, "RowKey": rk,
			"Timestamp": "2026-11-27T08:00:00.1234567Z", "etag": nil, "entity": nil}
		if op != OpDelete {
			c["etag"] = `W/"datetime'2026-11-27T08%3A00%3A00.1234567Z'"`
			c["entity"] = map[string]any{"PartitionKey": pk, "RowKey": rk, "Age": "7", "Age@odata.type": "Edm.Int64"}
		}
		c["cursor"] = "c" + strconv.Itoa(len(f.changes)+1)
		f.changes = append(f.changes, c)
	}
	close(f.added)
	f.added = make(chan struct{})
}

func azureError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("x-ms-error-code", code)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"odata.error":{"code":%q,"message":{"lang":"en-US","value":"%s happened"}}}`, code, code)
}

func (f *feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/-/accounts/"+devAccount+"/tables/T/changes" || !strings.HasPrefix(r.Header.Get("Authorization"), "SharedKeyLite "+devAccount+":") {
		azureError(w, http.StatusBadRequest, "WrongRequest")
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.RawQuery)
	fail := f.fail
	f.mu.Unlock()
	if fail != nil && fail(w, r) {
		return
	}
	q := r.URL.Query()
	limit := 1000
	if s := q.Get("limit"); s != "" {
		limit, _ = strconv.Atoi(s)
	}
	wait, _ := time.ParseDuration(q.Get("wait"))
	deadline := time.After(wait)
	for {
		f.mu.Lock()
		at := 0
		switch c := q.Get("cursor"); c {
		case "", Now:
			at = len(f.changes)
		case Oldest:
			at = f.first
		default:
			n, err := strconv.Atoi(strings.TrimPrefix(c, "c"))
			if err != nil || !strings.HasPrefix(c, "c") || n > len(f.changes) {
				f.mu.Unlock()
				azureError(w, http.StatusBadRequest, "InvalidQueryParameterValue")
				return
			}
			at = n
		}
		if at < f.first {
			w.Header().Set("x-pgtables-oldest-cursor", "c"+strconv.Itoa(f.first))
			f.mu.Unlock()
			azureError(w, http.StatusGone, "ChangeFeedCursorExpired")
			return
		}
		page := f.changes[at:min(len(f.changes), at+limit)]
		added := f.added
		f.mu.Unlock()
		if len(page) > 0 || wait == 0 {
			cursor := "c" + strconv.Itoa(at+len(page))
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"changes": page, "cursor": cursor})
			return
		}
		select {
		case <-added:
		case <-deadline:
			wait = 0
		case <-r.Context().Done():
			return
		}
	}
}

// collect is a handler that keeps the transactions it is given.
type collect struct {
	mu   sync.Mutex
	txns [][]string // "txn:op:pk/rk"
}

func (c *collect) handle(_ context.Context, txn []Change) error {
	var s []string
	for _, ch := range txn {
		s = append(s, ch.Txn+":"+ch.Op+":"+ch.PartitionKey+"/"+ch.RowKey)
	}
	c.mu.Lock()
	c.txns = append(c.txns, s)
	c.mu.Unlock()
	return nil
}

func (c *collect) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.txns)
}

// Pages of 3 cut transactions of 1, 2, 4 and 1 changes; the handler gets
// each whole, in order, the checkpoint the last handed change's cursor,
// and a second run from the file only what came after.
func TestFollowWholeTransactionsAndResume(t *testing.T) {
	t.Parallel()
	f, c := newFeed(t)
	f.add("a", OpInsert, "p", "1")
	f.add("b", OpMerge, "p", "1", "2")
	f.add("c", OpReplace, "q", "1", "2", "3", "4")
	f.add("d", OpDelete, "p", "2")
	cp := FileCheckpoint{Path: filepath.Join(t.TempDir(), "cursor")}
	var got collect
	fl := &Follower{Client: c, Checkpoint: cp, From: Oldest, Limit: 3, UntilCaughtUp: true}
	if err := fl.Follow(context.Background(), got.handle); err != nil {
		t.Fatal(err)
	}
	want := "[[a:insert:p/1] [b:merge:p/1 b:merge:p/2] [c:replace:q/1 c:replace:q/2 c:replace:q/3 c:replace:q/4] [d:delete:p/2]]"
	if got.String() != want {
		t.Errorf("got  %s\nwant %s", got.String(), want)
	}
	if cur, ok, err := cp.Load(context.Background()); err != nil || !ok || cur != "c8" {
		t.Errorf("checkpoint %q %v %v, want c8", cur, ok, err)
	}

	f.add("e", OpInsert, "r", "1", "2")
	var more collect
	if err := fl.Follow(context.Background(), more.handle); err != nil {
		t.Fatal(err)
	}
	if want := "[[e:insert:r/1 e:insert:r/2]]"; more.String() != want {
		t.Errorf("resumed: got %s, want %s", more.String(), want)
	}
}

// From now with nothing new, the resolved cursor is saved at once: what
// commits before the next run is not skipped.
func TestFollowSavesResolvedNow(t *testing.T) {
	t.Parallel()
	f, c := newFeed(t)
	f.add("old", OpInsert, "p", "1")
	cp := FileCheckpoint{Path: filepath.Join(t.TempDir(), "cursor")}
	fl := &Follower{Client: c, Checkpoint: cp, UntilCaughtUp: true}
	var got collect
	if err := fl.Follow(context.Background(), got.handle); err != nil {
		t.Fatal(err)
	}
	if got.String() != "[]" {
		t.Errorf("from now: %s", got.String())
	}
	f.add("new", OpInsert, "p", "2")
	if err := fl.Follow(context.Background(), got.handle); err != nil {
		t.Fatal(err)
	}
	if want := "[[new:insert:p/2]]"; got.String() != want {
		t.Errorf("got %s, want %s", got.String(), want)
	}
}

// A long poll returns as a change commits; cancelling ends Follow.
func TestFollowLongPoll(t *testing.T) {
	t.Parallel()
	f, c := newFeed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan []Change, 1)
	done := make(chan error, 1)
	fl := &Follower{Client: c, From: "c0", Wait: 10 * time.Second}
	go func() {
		done <- fl.Follow(ctx, func(_ context.Context, txn []Change) error {
			seen <- txn
			return nil
		})
	}()
	// Once the follower's request is held (or about to be), commit.
	for f.count() < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	f.add("x", OpInsert, "p", "1")
	select {
	case txn := <-seen:
		if len(txn) != 1 || txn[0].Txn != "x" || txn[0].ETag == "" || !strings.Contains(string(txn[0].Entity), `"Age@odata.type"`) {
			t.Errorf("got %+v", txn)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held request did not return the change")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !strings.Contains(f.requests[len(f.requests)-1], "wait=10s") {
		t.Errorf("requests %q do not wait", f.requests)
	}
}

func (f *feed) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// Network errors and 5xx are tried again with backoff; what retrying
// cannot change stops Follow with an error errors.Is tells apart.
func TestFollowErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		fail   func(n int, w http.ResponseWriter) bool // n: the request's number
		stop   bool                                    // Follow fails, after one request
		is     error                                   // a sentinel the error is, if any
		status int                                     // the *Error's status, if any
	}{
		{name: "503s then fine", fail: func(n int, w http.ResponseWriter) bool {
			if n < 3 {
				azureError(w, http.StatusServiceUnavailable, "ServerBusy")
				return true
			}
			return false
		}},
		{name: "connection dropped", fail: func(n int, w http.ResponseWriter) bool {
			if n < 2 {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return true
			}
			return false
		}},
		{name: "500", fail: func(n int, w http.ResponseWriter) bool {
			if n < 2 {
				azureError(w, http.StatusInternalServerError, "InternalError")
				return true
			}
			return false
		}},
		{name: "garbage 200", fail: func(_ int, w http.ResponseWriter) bool {
			fmt.Fprint(w, `{"changes":[{"op":"explode"}],"cursor":"c1"}`)
			return true
		}, stop: true, is: errPage},
		{name: "table gone", fail: func(_ int, w http.ResponseWriter) bool {
			azureError(w, http.StatusNotFound, "TableNotFound")
			return true
		}, stop: true, is: ErrTableNotFound, status: 404},
		{name: "disabled", fail: func(_ int, w http.ResponseWriter) bool {
			azureError(w, http.StatusConflict, "ChangeFeedDisabled")
			return true
		}, stop: true, is: ErrDisabled, status: 409},
		{name: "forbidden", fail: func(_ int, w http.ResponseWriter) bool {
			azureError(w, http.StatusForbidden, "AuthenticationFailed")
			return true
		}, stop: true, status: 403},
		{name: "bad cursor", fail: func(_ int, w http.ResponseWriter) bool {
			azureError(w, http.StatusBadRequest, "InvalidQueryParameterValue")
			return true
		}, stop: true, status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, c := newFeed(t)
			f.add("a", OpInsert, "p", "1")
			n := 0
			f.fail = func(w http.ResponseWriter, _ *http.Request) bool {
				n++ // under f.mu's protection: requests are serial here
				return tt.fail(n, w)
			}
			var retries []error
			fl := &Follower{Client: c, From: Oldest, UntilCaughtUp: true, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
				OnRetry: func(err error, _ time.Duration) { retries = append(retries, err) }}
			var got collect
			err := fl.Follow(context.Background(), got.handle)
			if !tt.stop {
				if err != nil || got.String() != "[[a:insert:p/1]]" || len(retries) == 0 {
					t.Fatalf("err %v, got %s, retries %v", err, got.String(), retries)
				}
				return
			}
			var fe *Error
			if tt.status != 0 && (!errors.As(err, &fe) || fe.Status != tt.status || fe.Message == "") {
				t.Errorf("err %v, want status %d with a message", err, tt.status)
			}
			if tt.is != nil && !errors.Is(err, tt.is) || err == nil {
				t.Errorf("err %v, want %v", err, tt.is)
			}
			for _, other := range []error{ErrCursorExpired, ErrTableNotFound, ErrDisabled} {
				if other != tt.is && errors.Is(err, other) {
					t.Errorf("err %v is also %v", err, other)
				}
			}
			if f.count() != 1 || len(retries) != 0 {
				t.Errorf("%d requests, %d retries; want 1, none", f.count(), len(retries))
			}
		})
	}
}

// A cursor older than retention stops Follow with ErrCursorExpired and
// the oldest cursor, which resumes.
func TestFollowCursorExpired(t *testing.T) {
	t.Parallel()
	f, c := newFeed(t)
	f.add("a", OpInsert, "p", "1")
	f.add("b", OpInsert, "p", "2")
	f.add("c", OpInsert, "p", "3")
	f.first = 2
	cp := FileCheckpoint{Path: filepath.Join(t.TempDir(), "cursor")}
	if err := cp.Save(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	var got collect
	fl := &Follower{Client: c, Checkpoint: cp, UntilCaughtUp: true}
	err := fl.Follow(context.Background(), got.handle)
	var fe *Error
	if !errors.Is(err, ErrCursorExpired) || !errors.As(err, &fe) || fe.OldestCursor != "c2" || fe.Code != "ChangeFeedCursorExpired" {
		t.Fatalf("err %v (%+v), want expired with oldest c2", err, fe)
	}
	if errors.Is(err, ErrTableNotFound) || errors.Is(err, ErrDisabled) {
		t.Errorf("%v is also another sentinel", err)
	}
	fl.Checkpoint, fl.From = nil, fe.OldestCursor
	if err := fl.Follow(context.Background(), got.handle); err != nil || got.String() != "[[c:insert:p/3]]" {
		t.Errorf("from the oldest cursor: %v %s", err, got.String())
	}
}

// A handler's error stops Follow before its transaction's cursor is
// saved: the next run hands the transaction over again.
func TestFollowHandlerErrorKeepsCursor(t *testing.T) {
	t.Parallel()
	f, c := newFeed(t)
	f.add("a", OpInsert, "p", "1")
	f.add("b", OpInsert, "p", "2")
	cp := FileCheckpoint{Path: filepath.Join(t.TempDir(), "cursor")}
	boom := errors.New("boom")
	fl := &Follower{Client: c, Checkpoint: cp, From: Oldest, UntilCaughtUp: true}
	err := fl.Follow(context.Background(), func(_ context.Context, txn []Change) error {
		if txn[0].Txn == "b" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	var got collect
	if err := fl.Follow(context.Background(), got.handle); err != nil || got.String() != "[[b:insert:p/2]]" {
		t.Errorf("second run: %v %s", err, got.String())
	}
}

// The checkpoint file: missing is none, saved is loaded, replaced leaves
// no temporary file, and a file of two words is refused.
func TestFileCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cp := FileCheckpoint{Path: filepath.Join(dir, "cp")}
	if c, ok, err := cp.Load(ctx); err != nil || ok || c != "" {
		t.Fatalf("missing: %q %v %v", c, ok, err)
	}
	for _, c := range []string{"abc", "def_-"} {
		if err := cp.Save(ctx, c); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := cp.Load(ctx); err != nil || !ok || got != c {
			t.Fatalf("load %q %v %v, want %q", got, ok, err, c)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left: %v", ents)
	}
	if err := os.WriteFile(cp.Path, []byte("a b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cp.Load(ctx); err == nil {
		t.Error("two words loaded")
	}
	if err := (FileCheckpoint{Path: filepath.Join(dir, "no", "such", "dir")}).Save(ctx, "x"); err == nil {
		t.Error("saved into a missing directory")
	}
}

// backoff doubles from the least to the most, with jitter below.
func TestBackoff(t *testing.T) {
	t.Parallel()
	f := &Follower{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 50: time.Second} {
		for range 20 {
			if d := f.backoff(n); d < want/2 || d > want {
				t.Errorf("backoff(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
}
