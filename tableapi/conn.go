package tableapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A load tool's own work competes with the server it measures for the same
// cores, so requests go through a lean HTTP/1.1 client: one keep-alive
// connection per concurrent request, request bytes written directly,
// responses parsed into reused buffers (Content-Length or chunked).

// httpConn is one keep-alive connection.
type httpConn struct {
	c   net.Conn
	r   *bufio.Reader
	w   *bufio.Writer
	buf []byte // the response body being read
	// idle is when the connection was last returned to the pool.
	idle time.Time
}

// maxIdle is how long a pooled connection may sit unused before it is
// dropped rather than reused: well inside servers' idle timeouts (pgtables'
// default is 2 minutes), which otherwise close it just as a request is
// written on it, as after the setup of a large preload.
const maxIdle = 30 * time.Second

// connPool hands out connections to one host.
type connPool struct {
	addr       string // host:port
	host       string // Host header
	tls        *tls.Config
	mu         sync.Mutex
	free       []*httpConn
	dialer     net.Dialer
	readTimout time.Duration
}

func newConnPool(scheme, host string) (*connPool, error) {
	p := &connPool{host: host, dialer: net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}, readTimout: 60 * time.Second}
	addr := host
	switch scheme {
	case "http":
		if _, _, err := net.SplitHostPort(host); err != nil {
			addr = net.JoinHostPort(host, "80")
		}
	case "https":
		if _, _, err := net.SplitHostPort(host); err != nil {
			addr = net.JoinHostPort(host, "443")
		}
		name, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		p.tls = &tls.Config{ServerName: name, MinVersion: tls.VersionTLS12}
	default:
		return nil, fmt.Errorf("endpoint scheme %q: want http or https", scheme)
	}
	p.addr = addr
	return p, nil
}

func (p *connPool) get(ctx context.Context) (*httpConn, error) {
	p.mu.Lock()
	for n := len(p.free); n > 0; n-- {
		c := p.free[n-1]
		p.free = p.free[:n-1]
		if time.Since(c.idle) <= maxIdle {
			p.mu.Unlock()
			return c, nil
		}
		c.c.Close()
	}
	p.mu.Unlock()
	c, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if p.tls != nil {
		tc := tls.Client(c, p.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	return &httpConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 16<<10)}, nil
}

func (p *connPool) put(c *httpConn) {
	c.idle = time.Now()
	p.mu.Lock()
	p.free = append(p.free, c)
	p.mu.Unlock()
}

// roundTrip sends one request and reads its response. header lines are
// "Name: value" pairs.
func (p *connPool) roundTrip(ctx context.Context, method, target string, header [][2]string, body []byte) (*Response, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	resp, keep, err := c.exchange(p, method, target, header, body)
	if !stop() || err != nil || !keep {
		c.c.Close()
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
	} else {
		p.put(c)
	}
	return resp, err
}

func (c *httpConn) exchange(p *connPool, method, target string, header [][2]string, body []byte) (*Response, bool, error) {
	c.c.SetDeadline(time.Now().Add(p.readTimout))
	w := c.w
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(target)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(p.host)
	w.WriteString("\r\n")
	for _, h := range header {
		w.WriteString(h[0])
		w.WriteString(": ")
		w.WriteString(h[1])
		w.WriteString("\r\n")
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut || method == "MERGE" {
		w.WriteString("Content-Length: ")
		w.WriteString(strconv.Itoa(len(body)))
		w.WriteString("\r\n")
	}
	w.WriteString("\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		return nil, false, err
	}
	return c.readResponse(method)
}

var errMalformed = errors.New("malformed HTTP response")

// maxBody bounds a response body: no answer of the Table service comes
// near it, and a broken one must not make the tool allocate without end.
const maxBody = 256 << 20

func (c *httpConn) readResponse(method string) (*Response, bool, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return nil, false, errMalformed
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return nil, false, errMalformed
	}
	resp := &Response{Status: status}
	length, chunked, keep := -1, false, line[7] == '1'
	var head []byte
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return nil, false, err
		}
		line = trimEOL(line)
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return nil, false, errMalformed
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 || length > maxBody {
				return nil, false, errMalformed
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			if bytes.EqualFold(value, []byte("close")) {
				keep = false
			} else if bytes.EqualFold(value, []byte("keep-alive")) {
				keep = true
			}
		}
		head = append(append(head, line...), '\n')
	}
	resp.Header = Header(head)
	c.buf = c.buf[:0]
	switch {
	case method == http.MethodHead || status == http.StatusNoContent || status == http.StatusNotModified || status < 200:
	case chunked:
		if err := c.readChunked(); err != nil {
			return nil, false, err
		}
	case length >= 0:
		if cap(c.buf) < length {
			c.buf = make([]byte, 0, length)
		}
		c.buf = c.buf[:length]
		if _, err := io.ReadFull(c.r, c.buf); err != nil {
			return nil, false, err
		}
	default:
		b, err := io.ReadAll(c.r)
		if err != nil {
			return nil, false, err
		}
		c.buf, keep = b, false
	}
	// The body leaves with the response: the connection goes back to the
	// pool at once and another worker's answer must not overwrite it.
	resp.Body, c.buf = c.buf, nil
	return resp, keep, nil
}

// trimEOL drops a line's CRLF (or bare LF).
func trimEOL(line []byte) []byte {
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	return line
}

func (c *httpConn) readChunked() error {
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(string(line), ";", 2)[0]), 16, 64)
		if err != nil || size < 0 || int64(len(c.buf))+size > maxBody {
			return errMalformed
		}
		if size == 0 {
			for { // trailers, then the blank line
				l, err := c.r.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(trimEOL(l)) == 0 {
					return nil
				}
			}
		}
		n := len(c.buf)
		c.buf = append(c.buf, make([]byte, size)...)
		if _, err := io.ReadFull(c.r, c.buf[n:]); err != nil {
			return err
		}
		if _, err := c.r.Discard(2); err != nil {
			return err
		}
	}
}
