package tableapi

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func readRaw(raw, method string) (*Response, bool, error) {
	c := &httpConn{r: bufio.NewReader(strings.NewReader(raw))}
	return c.readResponse(method)
}

func TestReadResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, raw, method string
		status            int
		body              string
		keep              bool
		etag              string
		err               bool
	}{
		{name: "content-length", method: "GET",
			raw:    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: W/\"x\"\r\n\r\nhello",
			status: 200, body: "hello", keep: true, etag: `W/"x"`},
		{name: "header names in any case", method: "GET",
			raw:    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\netag:  W/\"y\" \r\n\r\nhi",
			status: 200, body: "hi", keep: true, etag: `W/"y"`},
		{name: "chunked", method: "GET",
			raw:    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n",
			status: 200, body: "abcde", keep: true},
		{name: "no content", method: "PUT",
			raw:    "HTTP/1.1 204 No Content\r\nETag: W/\"z\"\r\n\r\n",
			status: 204, keep: true, etag: `W/"z"`},
		{name: "connection close", method: "GET",
			raw:    "HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
			status: 404, keep: false},
		{name: "HTTP/1.0 reads to the end", method: "GET",
			raw:    "HTTP/1.0 200 OK\r\n\r\nall of it",
			status: 200, body: "all of it", keep: false},
		{name: "not HTTP", method: "GET", raw: "SSH-2.0-OpenSSH\r\n\r\n", err: true},
		{name: "header without colon", method: "GET", raw: "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", err: true},
		{name: "bad length", method: "GET", raw: "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", err: true},
		{name: "short body", method: "GET", raw: "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", err: true},
		{name: "huge length", method: "GET", raw: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n", err: true},
		{name: "huge chunk", method: "GET", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffff\r\n", err: true},
		{name: "bad chunk size", method: "GET", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, keep, err := readRaw(tt.raw, tt.method)
			if tt.err {
				if err == nil {
					t.Fatalf("no error; status %d", r.Status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.status || string(r.Body) != tt.body || keep != tt.keep {
				t.Errorf("got %d %q keep=%v; want %d %q keep=%v", r.Status, r.Body, keep, tt.status, tt.body, tt.keep)
			}
			if got := r.Header.Get("ETag"); got != tt.etag {
				t.Errorf("ETag %q, want %q", got, tt.etag)
			}
		})
	}
}

func TestHeaderGet(t *testing.T) {
	t.Parallel()
	h := Header("x-ms-continuation-NextPartitionKey: 1!8!cDE-\nEtag: W/\"a\"\nETag: W/\"b\"\n")
	for name, want := range map[string]string{
		"X-Ms-Continuation-NextPartitionKey": "1!8!cDE-",
		"etag":                               `W/"a"`, // the first of repeated fields
		"x-ms-continuation-NextRowKey":       "",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("Get(%q) = %q, want %q", name, got, want)
		}
	}
}

// The response parser reads whatever a server sends: it must fail cleanly,
// never panic.
func FuzzReadResponse(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
	f.Add("HTTP/1.0 204 No Content\r\nConnection: keep-alive\r\n\r\n")
	f.Fuzz(func(t *testing.T, raw string) {
		r, _, err := readRaw(raw, "GET")
		if err == nil && r == nil {
			t.Fatal("no response and no error")
		}
	})
}

// A pooled connection is reused while fresh, and dropped once it has sat
// idle for longer than maxIdle, before the server's idle timeout can close
// it under a request.
func TestConnPoolDropsIdle(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	p, err := newConnPool("http", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.put(first)
	if again, err := p.get(ctx); err != nil || again != first {
		t.Fatalf("a fresh connection was not reused: %v", err)
	}
	p.put(first)
	first.idle = time.Now().Add(-maxIdle - time.Second)
	next, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer next.c.Close()
	if next == first {
		t.Fatal("a connection idle for longer than maxIdle was reused")
	}
	if _, err := first.c.Write([]byte("x")); err == nil {
		t.Error("the stale connection was not closed")
	}
}
