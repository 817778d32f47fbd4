package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Names and tokens that no table or key can have are answered without
// reaching the database: U+0000 in particular would make PostgreSQL fail
// the statement.
func TestImpossibleNamesAreNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, table := e.newTable()
	acct := "/devstoreaccount1"
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		status             int
		code               string
	}{
		{"QueryNul", "GET", acct + "/a%00b()", nil, 404, "TableNotFound"},
		{"InsertNul", "POST", acct + "/a%00b", []byte(`{"PartitionKey":"p","RowKey":"r"}`), 404, "TableNotFound"},
		{"GetNul", "GET", acct + "/a%00b(PartitionKey='p',RowKey='r')", nil, 404, "TableNotFound"},
		{"DeleteTableNul", "DELETE", acct + "/Tables('a%00b')", nil, 404, "ResourceNotFound"},
		{"QueryDash", "GET", acct + "/my-table()", nil, 404, "TableNotFound"},
		{"TooLong", "GET", acct + "/" + strings.Repeat("a", 64) + "()", nil, 404, "TableNotFound"},
		{"NulContinuation", "GET", acct + "/" + table + "()?NextPartitionKey=1!3!AGE", nil, 400, "InvalidInput"},
		{"NulTableContinuation", "GET", acct + "/Tables?NextTableName=1!3!AGE", nil, 400, "InvalidInput"},
		{"NulFilterKey", "GET", acct + "/" + table + "()?$filter=PartitionKey%20eq%20'a%00b'", nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, nil, tc.body)
			if tc.status == 200 {
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				return
			}
			wantError(t, r, tc.status, tc.code)
		})
	}
}

// A batch whose only request is a query answers it as Query Entities
// would: $filter, $select, $top and the continuation all apply.
func TestQueryBatchOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, table := e.newTable()
	ctx := context.Background()
	for i, v := range []int{5, 5, 7} {
		body := []byte(`{"PartitionKey":"p","RowKey":"r` + string(rune('0'+i)) + `","V":` + string(rune('0'+v)) + `,"W":1}`)
		if _, err := c.AddEntity(ctx, body, nil); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	b.WriteString("--batch_q\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n")
	b.WriteString("GET http://127.0.0.1:10002/devstoreaccount1/" + table + "()?$filter=V%20eq%205&$select=RowKey&$top=1 HTTP/1.1\r\nAccept: application/json;odata=nometadata\r\n\r\n")
	b.WriteString("\r\n--batch_q--\r\n")
	r := e.do("POST", "/devstoreaccount1/$batch", map[string]string{"Content-Type": "multipart/mixed; boundary=batch_q"}, b.Bytes())
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	_, params, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	part, err := multipart.NewReader(bytes.NewReader(r.body), params["boundary"]).NextPart()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(part)
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	body, _ := io.ReadAll(resp.Body)
	var doc struct{ Value []map[string]any }
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if resp.StatusCode != 200 || len(doc.Value) != 1 || len(doc.Value[0]) != 1 || doc.Value[0]["RowKey"] != "r0" {
		t.Fatalf("query batch answered %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("x-ms-continuation-NextRowKey") == "" {
		t.Errorf("no continuation in %q", raw)
	}
}

// A client that gives up while its write waits is not a server error.
func TestClientGoneIsNotInternalError(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	c, table := e.newTable()
	ctx := context.Background()
	if _, err := c.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"r"}`), nil); err != nil {
		t.Fatal(err)
	}
	// Hold the row so that the update waits, then give up on it.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	lockEntity(t, tx, table, "p", "r")
	reqCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(reqCtx, "PUT", e.baseURL+"/", strings.NewReader(`{"V":1}`))
	req.URL.Opaque = "/devstoreaccount1/" + table + "(PartitionKey='p',RowKey='r')"
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("x-ms-date", date)
	req.Header.Set("If-Match", "*")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "SharedKeyLite devstoreaccount1:"+signLite(date, req.URL.Opaque, ""))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("request finished with %d while the row was held", resp.StatusCode)
	}
	tx.Rollback(ctx) //nolint:errcheck
	// The server noticed by now; its metrics must not count a 500.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		m := e.do("GET", "/-/metrics", nil, nil)
		text := string(m.body)
		if strings.Contains(text, `code="500"`) {
			t.Fatalf("a 500 was counted:\n%s", grepLines(text, `code="500"`))
		}
		if strings.Contains(text, `operation="update_entity"`) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the cancelled update was never counted")
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The secondary location answers reads and refuses writes.
func TestSecondaryIsReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, table := e.newTable()
	sec := "/devstoreaccount1-secondary"
	if r := e.do("GET", sec+"/Tables", nil, nil); r.status != 200 {
		t.Fatalf("read on the secondary: %d %s", r.status, r.body)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"POST", sec + "/Tables", `{"TableName":"fromsecondary"}`},
		{"POST", sec + "/" + table, `{"PartitionKey":"p","RowKey":"r"}`},
		{"DELETE", sec + "/Tables('" + table + "')", ""},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		wantError(t, e.do(tc.method, tc.path, nil, body), 403, "AuthorizationFailure")
	}
	if r := e.do("GET", "/devstoreaccount1/"+table+"()", nil, nil); r.status != 200 || strings.Contains(string(r.body), `"RowKey"`) {
		t.Fatalf("a write through the secondary landed: %s", r.body)
	}
}
