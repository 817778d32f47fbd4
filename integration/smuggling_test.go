package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgtables/pgtables/httpapi"
)

// TestRequestSmuggling sends, on one raw connection, a request whose
// framing a proxy in front could read otherwise than pgtables, with a
// signed Create Table hidden after it where only one of the two readings
// finds it. pgtables must refuse the first with 400 and close the
// connection, so that the hidden request never runs (RFC 9112 §6.3,
// §11.2). The control case shows that a request pipelined after an
// acceptable one does run, so the test can see it.
func TestRequestSmuggling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	host := strings.TrimPrefix(e.baseURL, "http://")
	hidden := func(table string) string {
		body := fmt.Sprintf(`{"TableName":%q}`, table)
		date := time.Now().UTC().Format(http.TimeFormat)
		path := "/" + httpapi.DevAccount + "/Tables"
		return "POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nx-ms-date: " + date +
			"\r\nx-ms-version: 2019-02-02\r\nAccept: application/json;odata=nometadata\r\nContent-Type: application/json" +
			"\r\nAuthorization: SharedKeyLite " + httpapi.DevAccount + ":" + signLite(date, path, "") +
			fmt.Sprintf("\r\nContent-Length: %d\r\n\r\n", len(body)) + body
	}
	head := func(path string, headers ...string) string {
		return "POST /" + httpapi.DevAccount + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + strings.Join(headers, "\r\n") + "\r\n\r\n"
	}
	tests := []struct {
		name string
		// build returns what is written on the connection, hiding a
		// request that creates table.
		build  func(table string) string
		status int
		code   string // "": Go's own plain 400
	}{
		{"ContentLengthAndChunked", func(table string) string {
			body := "0\r\n\r\n" + hidden(table)
			return head("/Tables", fmt.Sprintf("Content-Length: %d", len(body)), "Transfer-Encoding: chunked") + body
		}, 400, "InvalidHeaderValue"},
		{"ChunkedAndContentLength", func(table string) string {
			// The proxy reads by Content-Length and forwards both as one
			// request; a chunked reading finds the second.
			body := "0\r\n\r\n"
			return head("/Tables", "Transfer-Encoding: CHUNKED", "Content-Length: 60") + body + hidden(table)
		}, 400, "InvalidHeaderValue"},
		{"ChunkedOnOpsPath", func(table string) string {
			body := "0\r\n\r\n" + hidden(table)
			return "GET /-/ready HTTP/1.1\r\nHost: " + host + fmt.Sprintf("\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(body)) + body
		}, 400, ""},
		{"TwoContentLengths", func(table string) string {
			return head("/Tables", "Content-Length: 0", "Content-Length: 5") + hidden(table)
		}, 400, ""},
		{"Chunked", func(table string) string {
			return head("/Tables", "Transfer-Encoding: chunked") + "0\r\n\r\n" + hidden(table)
		}, 400, "InvalidHeaderValue"},
		{"TwoDates", func(table string) string {
			date := time.Now().UTC().Format(http.TimeFormat)
			return head("/Tables", "x-ms-date: "+date, "x-ms-date: "+date, "Content-Length: 2") + "{}" + hidden(table)
		}, 400, "InvalidHeaderValue"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("smuggled%d%d", time.Now().UnixNano()%1e6, i)
			resps := exchange(t, host, tc.build(table))
			if len(resps) != 1 {
				t.Fatalf("%d responses on the connection, want 1 and then its close", len(resps))
			}
			r := resps[0]
			if r.status != tc.status || r.header.Get("x-ms-error-code") != tc.code {
				t.Errorf("got %d %q, want %d %q: %s", r.status, r.header.Get("x-ms-error-code"), tc.status, tc.code, trunc(r.body))
			}
			if tc.code != "" {
				wantError(t, r, tc.status, tc.code)
			}
			if _, err := e.service.NewClient(table).GetAccessPolicy(bg, nil); err == nil {
				t.Errorf("the hidden request ran: table %s exists", table)
			}
		})
	}
	t.Run("ControlPipelined", func(t *testing.T) {
		table := fmt.Sprintf("pipelined%d", time.Now().UnixNano()%1e6)
		date := time.Now().UTC().Format(http.TimeFormat)
		path := "/" + httpapi.DevAccount + "/Tables"
		first := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nx-ms-date: " + date +
			"\r\nAccept: application/json\r\nAuthorization: SharedKeyLite " + httpapi.DevAccount + ":" + signLite(date, path, "") + "\r\n\r\n"
		resps := exchange(t, host, first+hidden(table))
		if len(resps) != 2 || resps[0].status != 200 || resps[1].status != 201 {
			t.Fatalf("pipelined requests: %d responses", len(resps))
		}
		if _, err := e.service.NewClient(table).GetAccessPolicy(bg, nil); err != nil {
			t.Errorf("the pipelined request did not run: %v", err)
		}
	})
}

// exchange writes raw on a new connection to host and reads responses
// until the server closes it; a connection still open after a second of
// silence fails the test.
func exchange(t *testing.T, host, raw string) []*rawResponse {
	t.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var out []*rawResponse
	for {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		resp, err := http.ReadResponse(br, nil)
		var ne net.Error
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return out
		case errors.As(err, &ne) && ne.Timeout():
			if len(out) == 2 {
				return out // the control case: a keep-alive connection
			}
			t.Fatalf("the connection stayed open after %d responses", len(out))
		case err != nil:
			t.Fatalf("reading a response: %v", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &rawResponse{status: resp.StatusCode, header: resp.Header, body: body})
	}
}
