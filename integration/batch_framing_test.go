package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestBatchFraming sends batches whose framing is inconsistent: a
// sub-request whose Content-Length disagrees with its body (larger,
// smaller, negative, not a number, twice), or a part or sub-request whose
// header block is oversized. Each refuses the whole batch with 400
// InvalidInput, and nothing of it is written, not even its valid
// operations.
func TestBatchFraming(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, table := e.newTable()
	body := `{"PartitionKey":"p","RowKey":"b","V":2}`
	// op writes an insert of body with the given extra header lines, and
	// no Content-Length of its own.
	op := func(headers ...string) string {
		var b strings.Builder
		b.WriteString("POST http://127.0.0.1:10002/devstoreaccount1/" + table + " HTTP/1.1\r\n")
		b.WriteString("Content-Type: application/json\r\nPrefer: return-no-content\r\n")
		for _, h := range headers {
			b.WriteString(h + "\r\n")
		}
		b.WriteString("\r\n" + body)
		return b.String()
	}
	pad := strings.Repeat("a", 70<<10)
	cl := func(n int) string { return fmt.Sprintf("Content-Length: %d", n) }
	tests := []struct {
		name string
		ops  []string
		// partHeader is an extra MIME header line of the second part.
		partHeader string
		status     int
	}{
		{"Exact", []string{insertOp(table, "p", "a", true), op(cl(len(body)))}, "", 202},
		{"NoContentLength", []string{insertOp(table, "p", "a", true), op()}, "", 202},
		{"Larger", []string{insertOp(table, "p", "a", true), op(cl(len(body) + 10))}, "", 400},
		{"Smaller", []string{insertOp(table, "p", "a", true), op(cl(len(body) - 5))}, "", 400},
		{"Zero", []string{insertOp(table, "p", "a", true), op(cl(0))}, "", 400},
		{"Negative", []string{insertOp(table, "p", "a", true), op("Content-Length: -1")}, "", 400},
		{"Signed", []string{insertOp(table, "p", "a", true), op(fmt.Sprintf("Content-Length: +%d", len(body)))}, "", 400},
		{"NotANumber", []string{insertOp(table, "p", "a", true), op("Content-Length: forty")}, "", 400},
		{"Huge", []string{insertOp(table, "p", "a", true), op("Content-Length: 99999999999999999999")}, "", 400},
		{"Twice", []string{insertOp(table, "p", "a", true), op(cl(len(body)), cl(len(body)+1))}, "", 400},
		{"FirstOpLarger", []string{op(cl(len(body) + 1)), insertOp(table, "p", "a", true)}, "", 400},
		{"OversizedSubRequestHeaders", []string{insertOp(table, "p", "a", true), op("X-Pad: " + pad)}, "", 400},
		{"OversizedPartHeaders", []string{insertOp(table, "p", "a", true), op()}, "X-Pad: " + pad, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.tableSnapshot(table)
			var b strings.Builder
			b.WriteString("--batch_7b2e\r\nContent-Type: multipart/mixed; boundary=changeset_91c4\r\n\r\n")
			for i, o := range tc.ops {
				b.WriteString("--changeset_91c4\r\nContent-Transfer-Encoding: binary\r\nContent-Type: application/http\r\n")
				if i == 1 && tc.partHeader != "" {
					b.WriteString(tc.partHeader + "\r\n")
				}
				b.WriteString("\r\n" + o + "\r\n")
			}
			b.WriteString("--changeset_91c4--\r\n\r\n--batch_7b2e--\r\n")
			r := e.do("POST", "/devstoreaccount1/$batch", map[string]string{"Content-Type": "multipart/mixed; boundary=batch_7b2e"}, []byte(b.String()))
			if tc.status == http.StatusAccepted {
				if r.status != http.StatusAccepted {
					t.Fatalf("status %d: %s", r.status, trunc(r.body))
				}
				for _, s := range readBatchAnswer(t, r.header, r.body) {
					if s.status != http.StatusNoContent {
						t.Fatalf("sub-response %d: %s", s.status, s.raw)
					}
				}
				e.do("DELETE", e.entityPath(table, "p", "a"), map[string]string{"If-Match": "*"}, nil)
				e.do("DELETE", e.entityPath(table, "p", "b"), map[string]string{"If-Match": "*"}, nil)
				return
			}
			wantError(t, &rawResponse{status: r.status, header: r.header, body: r.body}, 400, "InvalidInput")
			if e.tableSnapshot(table) != before {
				t.Fatal("the refused batch wrote")
			}
		})
	}
}
