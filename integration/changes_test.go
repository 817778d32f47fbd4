package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testissuer"
	"github.com/pgtables/pgtables/store"
	"github.com/pgtables/pgtables/tokenauth"
)

// changeWire is a change as the feed sends it (docs/changefeed.md).
type changeWire struct {
	Cursor       string          `json:"cursor"`
	Op           string          `json:"op"`
	Txn          string          `json:"txn"`
	PartitionKey string          `json:"PartitionKey"`
	RowKey       string          `json:"RowKey"`
	Timestamp    string          `json:"Timestamp"`
	ETag         *string         `json:"etag"`
	Entity       json.RawMessage `json:"entity"`
}

type changesWire struct {
	Changes []changeWire `json:"changes"`
	Cursor  string       `json:"cursor"`
}

func changesPath(table, query string) string {
	p := "/-/accounts/" + httpapi.DevAccount + "/tables/" + table + "/changes"
	if query != "" {
		p += "?" + query
	}
	return p
}

// readChanges reads one page of the feed with Shared Key Lite.
func (e *env) readChanges(table, query string) changesWire {
	e.t.Helper()
	r := e.do(http.MethodGet, changesPath(table, query), nil, nil)
	if r.status != http.StatusOK {
		e.t.Fatalf("changes %s: %d %s", query, r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("Content-Type %q", ct)
	}
	var page changesWire
	if err := json.Unmarshal(r.body, &page); err != nil {
		e.t.Fatalf("changes %s: %v: %s", query, err, r.body)
	}
	return page
}

// Writes through the Go SDK, of every kind and in a transaction, come out
// of the feed in order, with what each did, the ETag the write answered
// and the entity after it with its types; paging by cursor sees each
// change once.
func TestChangeFeedRecordsSDKWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, table := e.newTable()
	ctx := context.Background()
	entity := func(rk string, age int64) []byte {
		b, _ := json.Marshal(map[string]any{"PartitionKey": "p", "RowKey": rk, "Age": age, "Age@odata.type": "Edm.Int64", "Name": "n" + rk})
		return b
	}
	var etags []string
	add, err := client.AddEntity(ctx, entity("a", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	etags = append(etags, string(add.ETag))
	up, err := client.UpsertEntity(ctx, entity("b", 2), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
	if err != nil {
		t.Fatal(err)
	}
	etags = append(etags, string(up.ETag))
	up, err = client.UpsertEntity(ctx, entity("b", 3), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeMerge})
	if err != nil {
		t.Fatal(err)
	}
	etags = append(etags, string(up.ETag))
	upd, err := client.UpdateEntity(ctx, entity("a", 4), &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace})
	if err != nil {
		t.Fatal(err)
	}
	etags = append(etags, string(upd.ETag))
	if _, err := client.DeleteEntity(ctx, "p", "b", nil); err != nil {
		t.Fatal(err)
	}
	etags = append(etags, "")
	actions := []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeAdd, Entity: entity("c", 5)},
		{ActionType: aztables.TransactionTypeUpdateMerge, Entity: entity("a", 6)},
		{ActionType: aztables.TransactionTypeDelete, Entity: entity("c", 0)},
	}
	if _, err := client.SubmitTransaction(ctx, actions[:1], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SubmitTransaction(ctx, actions[1:], nil); err != nil {
		t.Fatal(err)
	}

	var all []changeWire
	cursor := "oldest"
	for range 10 {
		page := e.readChanges(table, "cursor="+cursor+"&limit=2")
		all = append(all, page.Changes...)
		if len(page.Changes) > 0 && page.Cursor != page.Changes[len(page.Changes)-1].Cursor {
			t.Errorf("page cursor %s is not its last change's", page.Cursor)
		}
		cursor = page.Cursor
		if len(page.Changes) < 2 {
			break
		}
	}
	var got []string
	for _, c := range all {
		got = append(got, c.Op+" "+c.RowKey)
	}
	want := []string{"insert a", "insert b", "merge b", "replace a", "delete b", "insert c", "merge a", "delete c"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("changes %v, want %v", got, want)
	}
	for i, etag := range etags {
		c := all[i]
		if etag == "" {
			if c.ETag != nil || string(c.Entity) != "null" {
				t.Errorf("delete %d: etag %v entity %s", i, c.ETag, c.Entity)
			}
			continue
		}
		if c.ETag == nil || *c.ETag != etag {
			t.Errorf("change %d: etag %v, the write answered %s", i, c.ETag, etag)
		}
	}
	var ent map[string]any
	if err := json.Unmarshal(all[3].Entity, &ent); err != nil {
		t.Fatal(err)
	}
	if ent["Age"] != "4" || ent["Age@odata.type"] != "Edm.Int64" || ent["RowKey"] != "a" || ent["Name"] != "na" || ent["Timestamp"] == nil {
		t.Errorf("entity of replace a: %s", all[3].Entity)
	}
	if _, err := time.Parse(time.RFC3339Nano, all[4].Timestamp); err != nil {
		t.Errorf("delete's Timestamp %q: %v", all[4].Timestamp, err)
	}
	if all[6].Txn != all[7].Txn || all[5].Txn == all[6].Txn || all[4].Txn == all[5].Txn {
		t.Errorf("txns %s %s %s %s: the last two share one, no others", all[4].Txn, all[5].Txn, all[6].Txn, all[7].Txn)
	}
	// Resuming from the last cursor: nothing more.
	if page := e.readChanges(table, "cursor="+cursor); len(page.Changes) != 0 || page.Cursor != cursor {
		t.Errorf("after the end: %d changes, cursor %s (want %s)", len(page.Changes), page.Cursor, cursor)
	}
}

// A long-poll answers as soon as a change commits, and with none and the
// same cursor when the wait is over; "now" skips what was there before.
func TestChangeFeedLongPoll(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, store.Options{})
	e.runChangeFeed()
	client, table := e.newTable()
	ctx := context.Background()
	if _, err := client.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"before"}`), nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	empty := e.readChanges(table, "wait=300ms")
	if len(empty.Changes) != 0 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("now with nothing new: %d changes after %v", len(empty.Changes), time.Since(start))
	}
	type result struct {
		page changesWire
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		p := e.readChanges(table, "cursor="+empty.Cursor+"&wait=30s")
		done <- result{p, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond)
	// Waiting holds no database connection (the feed's LISTEN has one of
	// its own, outside the pool). The sequencer's poll holds one for a
	// moment (on a busy Citus cluster a few hundred ms): a waiting reader
	// would hold its own through every sample.
	held := e.pool.Stat().AcquiredConns()
	for deadline := time.Now().Add(2 * time.Second); held != 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		held = e.pool.Stat().AcquiredConns()
	}
	if held != 0 {
		t.Errorf("%d connections held while the long-poll waits", held)
	}
	wrote := time.Now()
	if _, err := client.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"after"}`), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if len(r.page.Changes) != 1 || r.page.Changes[0].RowKey != "after" {
			t.Fatalf("long-poll answered %+v", r.page)
		}
		t.Logf("answered %v after the write", r.at.Sub(wrote))
	case <-time.After(20 * time.Second):
		t.Fatal("the long-poll did not answer the change")
	}
}

// The parameters and errors of the endpoint, in Azure's shape.
func TestChangeFeedErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, table := e.newTable()
	_, other := e.newTable()
	otherCursor := e.readChanges(other, "").Cursor
	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"limit 0", changesPath(table, "limit=0"), 400, "InvalidQueryParameterValue"},
		{"limit 1001", changesPath(table, "limit=1001"), 400, "InvalidQueryParameterValue"},
		{"limit text", changesPath(table, "limit=ten"), 400, "InvalidQueryParameterValue"},
		{"wait 61s", changesPath(table, "wait=61s"), 400, "InvalidQueryParameterValue"},
		{"wait negative", changesPath(table, "wait=-1s"), 400, "InvalidQueryParameterValue"},
		{"wait no unit", changesPath(table, "wait=5"), 400, "InvalidQueryParameterValue"},
		{"cursor malformed", changesPath(table, "cursor=xyz!"), 400, "InvalidQueryParameterValue"},
		{"cursor empty", changesPath(table, "cursor="), 400, "InvalidQueryParameterValue"},
		{"cursor of another table", changesPath(table, "cursor="+otherCursor), 400, "InvalidQueryParameterValue"},
		{"no such table", changesPath("nosuchtable", ""), 404, "TableNotFound"},
	} {
		r := e.do(http.MethodGet, tc.path, nil, nil)
		if r.status != tc.status || r.header.Get("x-ms-error-code") != tc.code {
			t.Errorf("%s: %d %s %s, want %d %s", tc.name, r.status, r.header.Get("x-ms-error-code"), r.body, tc.status, tc.code)
			continue
		}
		var body struct {
			Err struct {
				Code string `json:"code"`
			} `json:"odata.error"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil || body.Err.Code != tc.code {
			t.Errorf("%s: body %s", tc.name, r.body)
		}
	}
	if r := e.do(http.MethodPost, changesPath(table, ""), nil, []byte("{}")); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d %s", r.status, r.body)
	}
	// A cursor of a table deleted and created again under its name.
	cursor := e.readChanges(table, "").Cursor
	if _, err := e.service.DeleteTable(context.Background(), table, nil); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodGet, changesPath(table, "cursor="+cursor), nil, nil); r.status != 404 || r.header.Get("x-ms-error-code") != "TableNotFound" {
		t.Errorf("deleted table: %d %s", r.status, r.body)
	}
	if _, err := e.service.CreateTable(context.Background(), table, nil); err != nil {
		t.Fatal(err)
	}
	if r := e.do(http.MethodGet, changesPath(table, "cursor="+cursor), nil, nil); r.status != 400 || r.header.Get("x-ms-error-code") != "InvalidQueryParameterValue" {
		t.Errorf("cursor of the deleted table: %d %s", r.status, r.body)
	}
}

// Past retention a cursor answers 410 with the oldest cursor, which reads
// on; an account with the feed off answers 409 and records nothing.
func TestChangeFeedRetentionAndOff(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, store.Options{ChangeFeed: store.ChangeFeedConfig{Retention: time.Millisecond}})
	client, table := e.newTable()
	ctx := context.Background()
	first := e.readChanges(table, "cursor=oldest").Cursor
	for _, rk := range []string{"a", "b"} {
		if _, err := client.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"`+rk+`"}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if page := e.readChanges(table, "cursor="+first); len(page.Changes) != 2 {
		t.Fatalf("%d changes before the purge", len(page.Changes))
	}
	time.Sleep(10 * time.Millisecond)
	if n, err := e.store.PurgeChanges(ctx); err != nil || n < 2 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	r := e.do(http.MethodGet, changesPath(table, "cursor="+first), nil, nil)
	oldest := r.header.Get("x-pgtables-oldest-cursor")
	if r.status != http.StatusGone || r.header.Get("x-ms-error-code") != "ChangeFeedCursorExpired" || oldest == "" || !strings.Contains(string(r.body), oldest) {
		t.Fatalf("expired cursor: %d %s %q %s", r.status, r.header.Get("x-ms-error-code"), oldest, r.body)
	}
	if _, err := client.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"c"}`), nil); err != nil {
		t.Fatal(err)
	}
	if page := e.readChanges(table, "cursor="+oldest); len(page.Changes) != 1 || page.Changes[0].RowKey != "c" {
		t.Fatalf("from the oldest cursor: %+v", page)
	}

	off := newEnvWith(t, store.Options{ChangeFeed: store.ChangeFeedConfig{OffAccounts: []string{httpapi.DevAccount}}})
	offClient, offTable := off.newTable()
	if _, err := offClient.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"a"}`), nil); err != nil {
		t.Fatal(err)
	}
	if r := off.do(http.MethodGet, changesPath(offTable, ""), nil, nil); r.status != http.StatusConflict || r.header.Get("x-ms-error-code") != "ChangeFeedDisabled" {
		t.Errorf("feed off: %d %s", r.status, r.body)
	}
	var rows int
	if err := off.pool.QueryRow(ctx, `SELECT count(*) FROM changes`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("feed off: %d change rows, %v", rows, err)
	}
}

// A table SAS with read, and an account SAS for objects with read, may
// read the feed; one without read may not; nor a bearer token without
// read on the table.
func TestChangeFeedAuthorization(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	e := newTLSEnv(t, bearerConfig(t, iss,
		tokenauth.Rule{Claim: "roles", Value: "reader", Account: "*", Permissions: []string{"read"}},
		tokenauth.Rule{Claim: "roles", Value: "writer", Account: "*", Permissions: []string{"write"}},
	))
	_, table := e.newTable()
	now := time.Now().UTC()
	readSAS := e.sdkTableSAS(table, aztables.SASPermissions{Read: true}, now.Add(-time.Hour), now.Add(time.Hour))
	addSAS := e.sdkTableSAS(table, aztables.SASPermissions{Add: true}, now.Add(-time.Hour), now.Add(time.Hour))
	owned, err := aztables.NewServiceClientWithSharedKey(e.svcURL+"/", mustCred(t), clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	accountURL, err := owned.GetAccountSASURL(aztables.AccountSASResourceTypes{Object: true}, aztables.AccountSASPermissions{Read: true}, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(accountURL)
	if err != nil {
		t.Fatal(err)
	}
	accountSAS := u.RawQuery
	reader := iss.Token(t, iss.StandardClaims("reader-app", "reader"))
	writer := iss.Token(t, iss.StandardClaims("writer-app", "writer"))
	noAuth := map[string]string{"Authorization": ""}
	for _, tc := range []struct {
		name   string
		query  string
		header map[string]string
		status int
	}{
		{"table SAS read", readSAS, noAuth, 200},
		{"account SAS read", accountSAS, noAuth, 200},
		{"table SAS add", addSAS, noAuth, 403},
		{"bearer read", "", map[string]string{"Authorization": "Bearer " + reader}, 200},
		{"bearer write", "", map[string]string{"Authorization": "Bearer " + writer}, 403},
		{"shared key lite", "", nil, 200},
	} {
		r := e.do(http.MethodGet, changesPath(table, tc.query), tc.header, nil)
		if r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
	}
}

func mustCred(t *testing.T) *aztables.SharedKeyCredential {
	t.Helper()
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}

// Server-Sent Events: changes stream as they commit, each with its cursor
// as id; Last-Event-ID resumes; deleting the table ends the stream.
func TestChangeFeedStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	client, table := e.newTable()
	ctx := context.Background()
	if _, err := client.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"a"}`), nil); err != nil {
		t.Fatal(err)
	}
	req := e.signedRequest(http.MethodGet, changesPath(table, "cursor=oldest"), nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := e.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan [3]string, 16) // id, event, data
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev [3]string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev[1] != "" {
					events <- ev
				}
				ev = [3]string{}
			case strings.HasPrefix(line, "id: "):
				ev[0] = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev[1] = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev[2] = line[6:]
			}
		}
	}()
	next := func() [3]string {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			return ev
		case <-time.After(20 * time.Second):
			t.Fatal("no event")
		}
		return [3]string{}
	}
	check := func(ev [3]string, op, rk string) {
		t.Helper()
		var c changeWire
		if err := json.Unmarshal([]byte(ev[2]), &c); err != nil {
			t.Fatalf("event %v: %v", ev, err)
		}
		if ev[1] != "change" || c.Op != op || c.RowKey != rk || c.Cursor != ev[0] {
			t.Fatalf("event %v, want %s %s", ev, op, rk)
		}
	}
	first := next()
	check(first, "insert", "a")
	if _, err := client.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"b"}`), nil); err != nil {
		t.Fatal(err)
	}
	check(next(), "insert", "b")

	// Resuming by Last-Event-ID from the first event.
	req2 := e.signedRequest(http.MethodGet, changesPath(table, ""), nil)
	req2.Header.Set("Accept", "text/event-stream")
	req2.Header.Set("Last-Event-ID", first[0])
	ctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp2, err := e.httpClient().Do(req2.WithContext(ctx2))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp2.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}
	if !strings.Contains(sc.Text(), `"RowKey":"b"`) {
		t.Errorf("resumed stream starts with %s", sc.Text())
	}
	resp2.Body.Close()

	if _, err := e.service.DeleteTable(ctx, table, nil); err != nil {
		t.Fatal(err)
	}
	if ev := next(); ev[1] != "end" || ev[2] != "{}" {
		t.Fatalf("after the delete: %v", ev)
	}
	select {
	case _, ok := <-events:
		if ok {
			t.Fatal("an event after end")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream stayed open after end")
	}
}

// runChangeFeed runs the change feed's sequencer and notifications for
// e's store until the test ends, as the server does.
func (e *env) runChangeFeed() {
	e.t.Helper()
	e.wantPool()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.store.RunChangeFeed(ctx, store.ChangeFeedTiming{}, slog.New(slog.DiscardHandler))
	}()
	e.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// Shutting down (Drain, as on SIGTERM) answers waiting long-polls at once
// and ends streams.
func TestChangeFeedEndsOnShutdown(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, store.Options{})
	_, table := e.newTable()
	polled := make(chan changesWire, 1)
	go func() { polled <- e.readChanges(table, "wait=60s") }()
	req := e.signedRequest(http.MethodGet, changesPath(table, ""), nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := e.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamEnded := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		close(streamEnded)
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	e.srv.Drain()
	select {
	case page := <-polled:
		if len(page.Changes) != 0 || page.Cursor == "" {
			t.Errorf("long-poll at shutdown: %+v", page)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll still waits after Drain")
	}
	select {
	case <-streamEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream still runs after Drain")
	}
	t.Logf("ended %v after Drain", time.Since(start))
}
