package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// Entity group transactions through aztables SubmitTransaction: every action
// kind, every failure (each leaving the table exactly as it was), and the
// exact shape of the answers on the wire.

// batchEntity is the JSON of an entity with keys pk, rk and props.
func batchEntity(t testing.TB, pk, rk string, props map[string]any) []byte {
	t.Helper()
	m := map[string]any{"PartitionKey": pk, "RowKey": rk}
	maps.Copy(m, props)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tableRows returns every stored row of a table, keyed "pk/rk", with its
// Timestamp, xmin and properties: equal snapshots mean nothing was written.
func tableRows(t testing.TB, e *env, table string) map[string]string {
	t.Helper()
	if e.pool == nil {
		return e.servedRows(table)
	}
	rows, err := e.pool.Query(context.Background(), `
SELECT e.pk, e.rk, e.ts::text || ' ' || e.xmin::text || ' ' || e.props::text
FROM entities e JOIN tables t ON t.id = e.table_id
WHERE t.lname = lower($1) AND t.deleted_at IS NULL`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var pk, rk, v string
		if err := rows.Scan(&pk, &rk, &v); err != nil {
			t.Fatal(err)
		}
		out[pk+"/"+rk] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantUnchanged fails when a table's rows differ from before.
func wantUnchanged(t testing.TB, e *env, table string, before map[string]string) {
	t.Helper()
	after := tableRows(t, e, table)
	for k, v := range after {
		if before[k] != v {
			t.Errorf("row %s written by a failed batch: before %q, after %q", k, before[k], v)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("row %s deleted by a failed batch", k)
		}
	}
}

// batchSub is one sub-response of a $batch answer.
type batchSub struct {
	raw    string
	status int
	header http.Header
	body   []byte
}

// readBatchAnswer parses a 202 $batch answer as the Go SDK does: the
// boundaries from the first lines, mime/multipart, http.ReadResponse.
func readBatchAnswer(t testing.TB, header http.Header, body []byte) []batchSub {
	t.Helper()
	mt, params, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" || !strings.HasPrefix(params["boundary"], "batchresponse_") {
		t.Fatalf("batch answer Content-Type %q", header.Get("Content-Type"))
	}
	if !bytes.HasPrefix(body, []byte("--"+params["boundary"]+"\r\n")) {
		t.Fatalf("batch answer does not start with its boundary: %s", trunc(body))
	}
	outer := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	part, err := outer.NextPart()
	if err != nil {
		t.Fatalf("batch answer: %v: %s", err, trunc(body))
	}
	_, cparams, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(cparams["boundary"], "changesetresponse_") {
		t.Fatalf("changeset answer Content-Type %q", part.Header.Get("Content-Type"))
	}
	inner := multipart.NewReader(part, cparams["boundary"])
	var subs []batchSub
	for {
		p, err := inner.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("changeset answer: %v", err)
		}
		raw, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
		if err != nil {
			t.Fatalf("sub-response %q: %v", raw, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, batchSub{raw: string(raw), status: resp.StatusCode, header: resp.Header, body: bytes.TrimSpace(b)})
	}
	if _, err := outer.NextPart(); err != io.EOF {
		t.Fatalf("more than one part in the batch answer (%v)", err)
	}
	return subs
}

var batchIndexPattern = regexp.MustCompile(`^(\d+):`)

// batchFailure returns the status, error code and failing operation of a
// failed SubmitTransaction, read from the raw answer: a 202 holding
// exactly one error sub-response, or (index -1) a plain error response.
func batchFailure(t testing.TB, err error) (status int, code string, index int) {
	t.Helper()
	if err == nil {
		t.Fatalf("batch succeeded, want a failure")
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("got %T %v, want *azcore.ResponseError", err, err)
	}
	body, perr := runtime.Payload(re.RawResponse)
	if perr != nil {
		t.Fatal(perr)
	}
	if re.StatusCode != http.StatusAccepted {
		if !bytes.HasPrefix(body, []byte("{")) {
			t.Errorf("plain batch error %d is not a JSON error body: %s", re.StatusCode, trunc(body))
		}
		return re.StatusCode, re.ErrorCode, -1
	}
	subs := readBatchAnswer(t, re.RawResponse.Header, body)
	if len(subs) != 1 {
		t.Fatalf("failed batch answered with %d sub-responses, want exactly one: %s", len(subs), trunc(body))
	}
	status, code, index = subError(t, subs[0])
	// The Go SDK reports the code of the outer response's x-ms-error-code.
	if re.ErrorCode != code {
		t.Errorf("SDK error code %q, want the failing operation's %q", re.ErrorCode, code)
	}
	return status, code, index
}

// subError returns the status, code and "N:" index of an error sub-response.
func subError(t testing.TB, s batchSub) (status int, code string, index int) {
	t.Helper()
	var oe struct {
		Error struct {
			Code    string `json:"code"`
			Message struct {
				Value string `json:"value"`
			} `json:"message"`
		} `json:"odata.error"`
	}
	if err := json.Unmarshal(s.body, &oe); err != nil {
		t.Fatalf("error sub-response body %q: %v", s.body, err)
	}
	if bytes.Contains(s.body, []byte("\n")) {
		t.Errorf("error sub-response JSON spans lines: %q", s.body)
	}
	m := batchIndexPattern.FindStringSubmatch(oe.Error.Message.Value)
	if m == nil {
		t.Errorf("error message %q lacks the N: prefix", oe.Error.Message.Value)
		return s.status, oe.Error.Code, -1
	}
	index, _ = strconv.Atoi(m[1])
	return s.status, oe.Error.Code, index
}

// userProps decodes an entity's JSON without keys, Timestamp and odata.*.
func userProps(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if k == "PartitionKey" || k == "RowKey" || k == "Timestamp" || strings.HasPrefix(k, "odata.") || strings.Contains(k, "@odata.") {
			delete(m, k)
		}
	}
	return m
}

func TestBatchActionKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := e.newTable()
	ctx := context.Background()
	old := map[string]any{"Old": "o", "V": float64(1)}
	upd := map[string]any{"V": float64(2), "New": "n"}
	merged := map[string]any{"Old": "o", "V": float64(2), "New": "n"}
	tests := []struct {
		name    string
		action  aztables.TransactionType
		ifMatch string // "", "*" or "current" (the entity's ETag)
		exists  bool
		want    map[string]any // nil: the entity is gone
	}{
		{"Add", aztables.TransactionTypeAdd, "", false, upd},
		{"AddIfMatchIgnored", aztables.TransactionTypeAdd, "*", false, upd},
		{"UpdateMerge", aztables.TransactionTypeUpdateMerge, "", true, merged},
		{"UpdateMergeMissingUpserts", aztables.TransactionTypeUpdateMerge, "", false, upd},
		{"UpdateMergeAny", aztables.TransactionTypeUpdateMerge, "*", true, merged},
		{"UpdateMergeETag", aztables.TransactionTypeUpdateMerge, "current", true, merged},
		{"UpdateReplace", aztables.TransactionTypeUpdateReplace, "", true, upd},
		{"UpdateReplaceMissingUpserts", aztables.TransactionTypeUpdateReplace, "", false, upd},
		{"UpdateReplaceAny", aztables.TransactionTypeUpdateReplace, "*", true, upd},
		{"UpdateReplaceETag", aztables.TransactionTypeUpdateReplace, "current", true, upd},
		{"InsertMergeNew", aztables.TransactionTypeInsertMerge, "", false, upd},
		{"InsertMergeExisting", aztables.TransactionTypeInsertMerge, "", true, merged},
		{"InsertMergeAny", aztables.TransactionTypeInsertMerge, "*", true, merged},
		{"InsertMergeETag", aztables.TransactionTypeInsertMerge, "current", true, merged},
		{"InsertReplaceNew", aztables.TransactionTypeInsertReplace, "", false, upd},
		{"InsertReplaceExisting", aztables.TransactionTypeInsertReplace, "", true, upd},
		{"InsertReplaceAny", aztables.TransactionTypeInsertReplace, "*", true, upd},
		{"InsertReplaceETag", aztables.TransactionTypeInsertReplace, "current", true, upd},
		{"Delete", aztables.TransactionTypeDelete, "", true, nil},
		{"DeleteAny", aztables.TransactionTypeDelete, "*", true, nil},
		{"DeleteETag", aztables.TransactionTypeDelete, "current", true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pk := "p-" + tc.name
			act := aztables.TransactionAction{ActionType: tc.action, Entity: batchEntity(t, pk, "e", upd)}
			if tc.exists {
				resp, err := c.AddEntity(ctx, batchEntity(t, pk, "e", old), nil)
				if err != nil {
					t.Fatal(err)
				}
				if tc.ifMatch == "current" {
					act.IfMatch = &resp.ETag
				}
			}
			if tc.ifMatch == "*" {
				act.IfMatch = ptrTo(azcore.ETagAny)
			}
			// Each kind runs between two inserts, so that its sub-response
			// is neither the first nor the last.
			_, err := c.SubmitTransaction(ctx, []aztables.TransactionAction{
				{ActionType: aztables.TransactionTypeAdd, Entity: batchEntity(t, pk, "a", nil)},
				act,
				{ActionType: aztables.TransactionTypeAdd, Entity: batchEntity(t, pk, "z", nil)},
			}, nil)
			if err != nil {
				t.Fatalf("SubmitTransaction: %v", err)
			}
			got, err := c.GetEntity(ctx, pk, "e", nil)
			switch {
			case tc.want == nil:
				if status, _ := respStatus(t, err); status != http.StatusNotFound {
					t.Errorf("entity still there after delete (%v)", err)
				}
			case err != nil:
				t.Fatalf("GetEntity: %v", err)
			default:
				if p := userProps(t, got.Value); !maps.Equal(p, tc.want) {
					t.Errorf("properties %v, want %v", p, tc.want)
				}
			}
			for _, rk := range []string{"a", "z"} {
				if _, err := c.GetEntity(ctx, pk, rk, nil); err != nil {
					t.Errorf("insert %s of the batch: %v", rk, err)
				}
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestBatchFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	add := func(t testing.TB, pk, rk string, props map[string]any) aztables.TransactionAction {
		return aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: batchEntity(t, pk, rk, props)}
	}
	big := strings.Repeat("x", 30000) // 60,000 bytes as UTF-16: under the property limit
	tests := []struct {
		name string
		// build seeds the table and returns the batch; the table's rows are
		// snapshotted after it.
		build  func(t *testing.T, c *aztables.Client) []aztables.TransactionAction
		status int
		code   string
		index  int // -1: a plain (non-multipart) error
	}{
		{"StaleETag", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			r, err := c.AddEntity(ctx, batchEntity(t, "p", "s", map[string]any{"V": 1}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.UpdateEntity(ctx, batchEntity(t, "p", "s", map[string]any{"V": 2}), &aztables.UpdateEntityOptions{IfMatch: &r.ETag, UpdateMode: aztables.UpdateModeReplace}); err != nil {
				t.Fatal(err)
			}
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", nil),
				{ActionType: aztables.TransactionTypeUpdateReplace, Entity: batchEntity(t, "p", "s", map[string]any{"V": 3}), IfMatch: &r.ETag}}
		}, 412, "UpdateConditionNotSatisfied", 2},
		{"StaleETagMergeDelete", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			r, err := c.AddEntity(ctx, batchEntity(t, "p", "s", map[string]any{"V": 1}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.AddEntity(ctx, batchEntity(t, "p", "m", map[string]any{"V": 1}), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := c.UpsertEntity(ctx, batchEntity(t, "p", "s", map[string]any{"V": 2}), nil); err != nil {
				t.Fatal(err)
			}
			return []aztables.TransactionAction{
				{ActionType: aztables.TransactionTypeUpdateMerge, Entity: batchEntity(t, "p", "m", map[string]any{"W": 1}), IfMatch: ptrTo(azcore.ETagAny)},
				{ActionType: aztables.TransactionTypeDelete, Entity: batchEntity(t, "p", "s", nil), IfMatch: &r.ETag}}
		}, 412, "UpdateConditionNotSatisfied", 1},
		{"DuplicateInsert", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			if _, err := c.AddEntity(ctx, batchEntity(t, "p", "b", nil), nil); err != nil {
				t.Fatal(err)
			}
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", map[string]any{"V": 9}), add(t, "p", "c", nil)}
		}, 409, "EntityAlreadyExists", 1},
		{"UpdateMissing", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil),
				{ActionType: aztables.TransactionTypeUpdateReplace, Entity: batchEntity(t, "p", "missing", nil), IfMatch: ptrTo(azcore.ETagAny)}}
		}, 404, "ResourceNotFound", 1},
		{"MergeMissing", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil),
				{ActionType: aztables.TransactionTypeUpdateMerge, Entity: batchEntity(t, "p", "missing", nil), IfMatch: ptrTo(azcore.ETagAny)}}
		}, 404, "ResourceNotFound", 1},
		{"DeleteMissing", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", nil),
				{ActionType: aztables.TransactionTypeDelete, Entity: batchEntity(t, "p", "missing", nil)}}
		}, 404, "ResourceNotFound", 2},
		{"MixedPartitions", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", nil), add(t, "q", "c", nil)}
		}, 400, "CommandsInBatchActOnDifferentPartitions", 2},
		{"TooManyOperations", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			var acts []aztables.TransactionAction
			for i := range 101 {
				acts = append(acts, add(t, "p", fmt.Sprintf("r%03d", i), nil))
			}
			return acts
		}, 400, "InvalidInput", 100},
		{"SameEntityTwice", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", nil),
				{ActionType: aztables.TransactionTypeUpdateMerge, Entity: batchEntity(t, "p", "a", map[string]any{"V": 1})}}
		}, 400, "InvalidDuplicateRow", 2},
		{"BodyOver4MiB", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			var acts []aztables.TransactionAction
			for i := range 80 {
				acts = append(acts, add(t, "p", fmt.Sprintf("r%03d", i), map[string]any{"A": big, "B": big}))
			}
			return acts
		}, 413, "RequestBodyTooLarge", -1},
		{"BadPropertyName", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", nil), add(t, "p", "c", map[string]any{"bad name": 1})}
		}, 400, "PropertyNameInvalid", 2},
		{"PropertyValueTooLarge", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", map[string]any{"S": big + big})}
		}, 400, "PropertyValueTooLarge", 1},
		{"TooManyProperties", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			props := map[string]any{}
			for i := range 253 {
				props[fmt.Sprintf("P%d", i)] = i
			}
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", props)}
		}, 400, "TooManyProperties", 1},
		{"BadKeyCharacter", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b/c", nil)}
		}, 400, "OutOfRangeInput", 1},
		{"BadKeyInURL", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil),
				{ActionType: aztables.TransactionTypeUpdateReplace, Entity: batchEntity(t, "p", "b#c", nil)}}
		}, 400, "OutOfRangeInput", 1},
		{"BadInt64", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", nil),
				add(t, "p", "c", map[string]any{"N": "abc", "N@odata.type": "Edm.Int64"})}
		}, 400, "InvalidInput", 2},
		// Limits that only the merged entity breaks are found by the store
		// inside the transaction, after the batch's earlier writes.
		{"MergedEntityTooLarge", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			props := map[string]any{}
			for i := range 15 {
				props[fmt.Sprintf("P%d", i)] = big
			}
			if _, err := c.AddEntity(ctx, batchEntity(t, "p", "m", props), nil); err != nil {
				t.Fatal(err)
			}
			return []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", nil),
				{ActionType: aztables.TransactionTypeUpdateMerge, Entity: batchEntity(t, "p", "m", map[string]any{"Q1": big, "Q2": big, "Q3": big})}}
		}, 400, "EntityTooLarge", 2},
		{"MergedTooManyProperties", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			props := map[string]any{}
			for i := range 250 {
				props[fmt.Sprintf("P%d", i)] = i
			}
			if _, err := c.AddEntity(ctx, batchEntity(t, "p", "m", props), nil); err != nil {
				t.Fatal(err)
			}
			return []aztables.TransactionAction{add(t, "p", "a", nil),
				{ActionType: aztables.TransactionTypeInsertMerge, Entity: batchEntity(t, "p", "m", map[string]any{"Q1": 1, "Q2": 2, "Q3": 3})},
				add(t, "p", "b", nil)}
		}, 400, "TooManyProperties", 1},
		{"BadETag", func(t *testing.T, c *aztables.Client) []aztables.TransactionAction {
			if _, err := c.AddEntity(ctx, batchEntity(t, "p", "b", nil), nil); err != nil {
				t.Fatal(err)
			}
			return []aztables.TransactionAction{add(t, "p", "a", nil),
				{ActionType: aztables.TransactionTypeDelete, Entity: batchEntity(t, "p", "b", nil), IfMatch: ptrTo(azcore.ETag("no-quotes"))}}
		}, 400, "InvalidInput", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, table := e.newTable()
			acts := tc.build(t, c)
			before := tableRows(t, e, table)
			_, err := c.SubmitTransaction(ctx, acts, nil)
			status, code, index := batchFailure(t, err)
			if status != tc.status || code != tc.code || index != tc.index {
				t.Errorf("got %d %s at %d, want %d %s at %d", status, code, index, tc.status, tc.code, tc.index)
			}
			wantUnchanged(t, e, table, before)
		})
	}
	t.Run("MissingTable", func(t *testing.T) {
		t.Parallel()
		c := e.service.NewClient("nosuchtable")
		_, err := c.SubmitTransaction(ctx, []aztables.TransactionAction{add(t, "p", "a", nil), add(t, "p", "b", nil)}, nil)
		if status, code, index := batchFailure(t, err); status != 404 || code != "TableNotFound" || index != 0 {
			t.Errorf("got %d %s at %d, want 404 TableNotFound at 0", status, code, index)
		}
		if e.pool == nil { // the local backend: what the server answers
			if r := e.do("GET", "/"+httpapi.DevAccount+"/Tables('nosuchtable')", nil, nil); r.status != http.StatusNotFound {
				t.Errorf("the failed batch left a table nosuchtable: GET answers %d", r.status)
			}
			return
		}
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM tables WHERE lname = 'nosuchtable'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("the failed batch left %d tables named nosuchtable (%v)", n, err)
		}
	})
	t.Run("IfMatchSyntax", func(t *testing.T) {
		t.Parallel()
		c, table := e.newTable()
		if _, err := c.AddEntity(ctx, batchEntity(t, "p", "s", nil), nil); err != nil {
			t.Fatal(err)
		}
		key := func(rk string) string { return table + "(PartitionKey='p',RowKey='" + rk + "')" }
		azure := `W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`
		for _, tc := range []struct {
			name    string
			ifMatch []string
			status  int
			code    string
		}{
			// Present but empty: never taken for absent, which would make
			// the update an upsert that creates "missing".
			{"Empty", []string{"If-Match:"}, 400, "InvalidInput"},
			{"Blank", []string{"If-Match:   "}, 400, "InvalidInput"},
			{"Strong", []string{`If-Match: "abc"`}, 400, "InvalidInput"},
			{"Twice", []string{"If-Match: *", "If-Match: *"}, 400, "InvalidInput"},
			{"LowerCaseWeak", []string{"If-Match: w/" + azure[2:]}, 412, "UpdateConditionNotSatisfied"},
		} {
			for _, rk := range []string{"s", "missing"} {
				before := tableRows(t, e, table)
				ct, body := rawBatch(insertOp(table, "p", "a", true),
					subOp("PUT", key(rk), tc.ifMatch, `{"PartitionKey":"p","RowKey":"`+rk+`","V":2}`))
				r := e.do("POST", "/devstoreaccount1/$batch", map[string]string{"Content-Type": ct}, body)
				if r.status != http.StatusAccepted {
					t.Fatalf("%s %s: status %d: %s", tc.name, rk, r.status, trunc(r.body))
				}
				status, code := tc.status, tc.code
				if rk == "missing" && status == 412 {
					status, code = 404, "ResourceNotFound"
				}
				subs := readBatchAnswer(t, r.header, r.body)
				if got, gotCode, index := subError(t, subs[0]); len(subs) != 1 || got != status || gotCode != code || index != 1 {
					t.Errorf("%s %s: got %d %s at %d, want %d %s at 1", tc.name, rk, got, gotCode, index, status, code)
				}
				wantUnchanged(t, e, table, before)
			}
		}
	})
	t.Run("KeyLiterals", func(t *testing.T) {
		t.Parallel()
		c, table := e.newTable()
		if _, err := c.AddEntity(ctx, batchEntity(t, "p", "a", nil), nil); err != nil {
			t.Fatal(err)
		}
		put := func(pred string) string {
			return subOp("PUT", table+"("+pred+")", nil, `{"V":2}`)
		}
		// Strict OData literals: an undoubled quote or an extra key refuses
		// the batch, whatever the body says.
		for _, pred := range []string{"PartitionKey='p',RowKey='a',Other='x'", "PartitionKey='p',RowKey='a'b'", "PartitionKey='p',RowKey='a',RowKey='b'"} {
			before := tableRows(t, e, table)
			ct, body := rawBatch(insertOp(table, "p", "n", true), put(pred))
			r := e.do("POST", "/devstoreaccount1/$batch", map[string]string{"Content-Type": ct}, body)
			if r.status != http.StatusAccepted {
				t.Fatalf("%s: status %d: %s", pred, r.status, trunc(r.body))
			}
			subs := readBatchAnswer(t, r.header, r.body)
			if status, code, index := subError(t, subs[0]); status != 400 || code != "InvalidInput" || index != 1 {
				t.Errorf("%s: got %d %s at %d, want 400 InvalidInput at 1", pred, status, code, index)
			}
			wantUnchanged(t, e, table, before)
		}
		// The Go SDK writes keys undoubled in its batches: from it, the
		// predicate is read as the key it meant.
		ct, body := rawBatch(put("PartitionKey='p',RowKey='it's'"))
		r := e.do("POST", "/devstoreaccount1/$batch", map[string]string{"Content-Type": ct, "User-Agent": "azsdk-go-aztables/v1.3.0 (go1.26.8; linux)"}, body)
		if r.status != http.StatusAccepted {
			t.Fatalf("Go batch: status %d: %s", r.status, trunc(r.body))
		}
		if subs := readBatchAnswer(t, r.header, r.body); len(subs) != 1 || subs[0].status != 204 {
			t.Fatalf("Go batch: %+v", subs)
		}
		wantProps(t, c, "p", "it's", map[string]any{"V": int32(2)})
	})
	t.Run("MixedTables", func(t *testing.T) {
		t.Parallel()
		_, t1 := e.newTable()
		_, t2 := e.newTable()
		before1, before2 := tableRows(t, e, t1), tableRows(t, e, t2)
		ct, body := rawBatch(insertOp(t1, "p", "a", true), insertOp(t1, "p", "b", true), insertOp(t2, "p", "c", true))
		r := e.do("POST", "/devstoreaccount1/$batch", map[string]string{"Content-Type": ct}, body)
		if r.status != http.StatusAccepted {
			t.Fatalf("status %d: %s", r.status, trunc(r.body))
		}
		subs := readBatchAnswer(t, r.header, r.body)
		if len(subs) != 1 {
			t.Fatalf("%d sub-responses", len(subs))
		}
		if status, code, index := subError(t, subs[0]); status != 400 || code != "CommandsInBatchActOnDifferentPartitions" || index != 2 {
			t.Errorf("got %d %s at %d, want 400 CommandsInBatchActOnDifferentPartitions at 2", status, code, index)
		}
		wantUnchanged(t, e, t1, before1)
		wantUnchanged(t, e, t2, before2)
	})
}

// rawBatch builds a $batch body the way aztables does (one changeset,
// CRLF, sorted part headers).
func rawBatch(ops ...string) (contentType string, body []byte) {
	var b bytes.Buffer
	b.WriteString("--batch_7b2e\r\nContent-Type: multipart/mixed; boundary=changeset_91c4\r\n\r\n")
	for _, op := range ops {
		b.WriteString("--changeset_91c4\r\nContent-Transfer-Encoding: binary\r\nContent-Type: application/http\r\n\r\n")
		b.WriteString(op)
		b.WriteString("\r\n")
	}
	b.WriteString("--changeset_91c4--\r\n\r\n--batch_7b2e--\r\n")
	return "multipart/mixed; boundary=batch_7b2e", b.Bytes()
}

// subOp is one sub-request: method, path after the account, headers, body.
func subOp(method, path string, header []string, body string) string {
	var b strings.Builder
	b.WriteString(method + " http://127.0.0.1:10002/devstoreaccount1/" + path + " HTTP/1.1\r\n")
	b.WriteString("Accept: application/json;odata=minimalmetadata\r\n")
	if body != "" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\nContent-Type: application/json\r\n")
	}
	for _, h := range header {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

func insertOp(table, pk, rk string, noContent bool) string {
	var h []string
	if noContent {
		h = []string{"Prefer: return-no-content"}
	}
	return subOp("POST", table, h, fmt.Sprintf(`{"PartitionKey":%q,"RowKey":%q,"V":1}`, pk, rk))
}

// TestBatchAnswerShape checks a successful answer on the wire: one
// sub-response per operation in request order with the right status,
// "ETag: " spelled so, and ETags and Timestamp as the entities have them:
// one Timestamp for the whole batch, a new ETag for each entity.
func TestBatchAnswerShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, table := e.newTable()
	seeded := map[string]azcore.ETag{}
	for _, rk := range []string{"c", "d", "f"} {
		r, err := c.AddEntity(ctx, batchEntity(t, "p", rk, map[string]any{"V": 0}), nil)
		if err != nil {
			t.Fatal(err)
		}
		seeded[rk] = r.ETag
	}
	ent := func(rk string) string { return fmt.Sprintf(`{"PartitionKey":"p","RowKey":%q,"V":5}`, rk) }
	key := func(rk string) string { return table + "(PartitionKey='p',RowKey='" + rk + "')" }
	ops := []struct {
		rk, op string
		status int
	}{
		{"a", insertOp(table, "p", "a", true), 204},
		{"b", insertOp(table, "p", "b", false), 201},
		{"c", subOp("MERGE", key("c"), []string{"If-Match: *"}, ent("c")), 204},
		{"d", subOp("PUT", key("d"), []string{"If-Match: " + string(seeded["d"])}, ent("d")), 204},
		{"e", subOp("PUT", key("e"), nil, ent("e")), 204},
		{"g", subOp("PATCH", key("g"), nil, ent("g")), 204},
		{"f", subOp("DELETE", key("f"), []string{"If-Match: *"}, ""), 204},
	}
	var parts []string
	for _, o := range ops {
		parts = append(parts, o.op)
	}
	ct, body := rawBatch(parts...)
	r := e.do("POST", "/devstoreaccount1/$batch", map[string]string{"Content-Type": ct}, body)
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, trunc(r.body))
	}
	subs := readBatchAnswer(t, r.header, r.body)
	if len(subs) != len(ops) {
		t.Fatalf("%d sub-responses for %d operations:\n%s", len(subs), len(ops), r.body)
	}
	etags := map[string]string{}
	for i, o := range ops {
		s := subs[i]
		if s.status != o.status {
			t.Errorf("sub-response %d (%s): status %d, want %d", i, o.rk, s.status, o.status)
		}
		if strings.Contains(s.raw, "Etag:") || strings.Contains(s.raw, "etag:") {
			t.Errorf("sub-response %d spells ETag otherwise: %q", i, s.raw)
		}
		m := regexp.MustCompile(`\r\nETag: (W/"[^\r\n]*")\r\n`).FindStringSubmatch(s.raw)
		if o.rk == "f" {
			if m != nil {
				t.Errorf("delete answered with an ETag")
			}
			continue
		}
		if m == nil {
			t.Errorf("sub-response %d (%s) has no line \"ETag: W/...\": %q", i, o.rk, s.raw)
			continue
		}
		etags[o.rk] = m[1]
		if s.status == 204 && strings.Contains(s.raw, "{") {
			t.Errorf("204 sub-response %d has a brace: %q", i, s.raw)
		}
	}
	if loc := subs[0].header.Get("Location"); !strings.HasSuffix(loc, "/"+key("a")) || subs[0].header.Get("Preference-Applied") != "return-no-content" {
		t.Errorf("insert no-content headers %v", subs[0].header)
	}
	var created map[string]any
	if err := json.Unmarshal(subs[1].body, &created); err != nil {
		t.Fatalf("201 body %q: %v", subs[1].body, err)
	}
	if !strings.HasPrefix(subs[1].header.Get("Content-Type"), "application/json") || created["RowKey"] != "b" || created["odata.etag"] != etags["b"] {
		t.Errorf("201 sub-response: %v %v", subs[1].header, created)
	}
	// Read back: the sub-responses' ETags are the entities' ETags, new for
	// every entity written and each entity's own; the Timestamp is one for
	// the whole batch.
	timestamps := map[string]bool{}
	owner := map[string]string{}
	for rk, etag := range etags {
		if other, dup := owner[etag]; dup {
			t.Errorf("%s and %s share the ETag %s", rk, other, etag)
		}
		owner[etag] = rk
	}
	for rk, etag := range etags {
		g, err := c.GetEntity(ctx, "p", rk, nil)
		if err != nil {
			t.Fatalf("GetEntity %s: %v", rk, err)
		}
		if string(g.ETag) != etag {
			t.Errorf("%s: ETag %s, answered %s", rk, g.ETag, etag)
		}
		var v struct{ Timestamp string }
		if err := json.Unmarshal(g.Value, &v); err != nil {
			t.Fatal(err)
		}
		timestamps[v.Timestamp] = true
		if rk == "b" && created["Timestamp"] != v.Timestamp {
			t.Errorf("201 body Timestamp %v, stored %s", created["Timestamp"], v.Timestamp)
		}
	}
	if len(timestamps) != 1 {
		t.Errorf("entities of one batch have %d Timestamps: %v", len(timestamps), timestamps)
	}
	for rk, old := range seeded {
		if string(old) == etags[rk] {
			t.Errorf("%s kept its ETag", rk)
		}
	}
	if _, err := c.GetEntity(ctx, "p", "f", nil); err == nil {
		t.Errorf("f not deleted")
	}
}
