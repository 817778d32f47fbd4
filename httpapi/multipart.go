package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/quotedprintable"
	"strings"
)

// The $batch body is in memory (readBody), so its multipart structure is
// split in place: each part's content is a slice of the body. Reading it
// through mime/multipart instead cost a reader, a header map and a copy
// per part, a fifth of the CPU time of a 100-entity batch. The grammar is
// mime/multipart's, which FuzzSplitMultipart checks against it: the first
// delimiter line sets the line ending (CRLF, or LF as several clients
// write it), lines before it are a preamble, a part's content ends at the
// line ending before the next delimiter, the close delimiter may lack its
// line ending, and what follows it is ignored.

// mimePart is one part of a multipart body.
type mimePart struct {
	contentType string // the Content-Type header, "" when absent
	content     []byte
}

var errMultipart = errors.New("multipart")

// errHeadersUnterminated: the body ends inside a part's headers.
// mime/multipart takes that for the end of the body and returns the parts
// before it, so that a truncated changeset would run what arrived; here it
// is malformed.
var errHeadersUnterminated = fmt.Errorf("%w: the body ends inside a part's headers", errMultipart)

// maxPartHeaders is mime/multipart's limit on the headers of one part.
const maxPartHeaders = 10000

// errPartHeadersTooLarge: a part's header block exceeds maxSubHeaderBytes,
// which mime/multipart allows up to 10 MiB.
var errPartHeadersTooLarge = fmt.Errorf("%w: a part's headers exceed %d bytes", errMultipart, maxSubHeaderBytes)

// splitMultipart splits body into its parts.
func splitMultipart(body []byte, boundary string) ([]mimePart, error) {
	if boundary == "" {
		return nil, fmt.Errorf("%w: boundary is empty", errMultipart)
	}
	dash := "--" + boundary
	nl := "\r\n"
	rest := body
	// Find the first delimiter line, skipping the preamble; a close
	// delimiter first means no parts.
	for {
		line, after, ok := cutLine(rest)
		if !ok && isCloseDelimiter(line, dash, "") {
			return nil, nil
		}
		if !ok {
			return nil, fmt.Errorf("%w: no delimiter line", errMultipart)
		}
		if t, found := strings.CutPrefix(string(line), dash); found {
			t = strings.TrimLeft(t, " \t")
			if t == "\n" {
				nl = "\n"
			}
			if t == nl {
				rest = after
				break
			}
		}
		if isCloseDelimiter(line, dash, nl) {
			return nil, nil
		}
		rest = after
	}
	var parts []mimePart
	for {
		p, after, err := readPart(rest, dash, nl)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
		// after starts at the delimiter that ended the part.
		line, next, _ := cutLine(after)
		switch {
		case isCloseDelimiter(line, dash, nl):
			return parts, nil
		case isDelimiter(line, dash, nl):
			rest = next
		default:
			return nil, fmt.Errorf("%w: malformed delimiter line", errMultipart)
		}
	}
}

// readPart reads the header block and content of the part that starts at
// b, and returns the rest from the delimiter line that ends it.
func readPart(b []byte, dash, nl string) (mimePart, []byte, error) {
	var p mimePart
	var haveType, haveCTE bool
	qp := false
	headers := 0
	// Headers, up to an empty line, read as net/textproto reads them:
	// lines end in LF or CRLF, folded lines continue the one before, and
	// names are tokens (spaces allowed, but such a name matches nothing).
	if len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		return p, nil, fmt.Errorf("%w: malformed part header initial line", errMultipart)
	}
	start := len(b)
	for {
		line, after, ok := headerLine(b)
		if !ok {
			return p, nil, errHeadersUnterminated
		}
		b = after
		if len(line) == 0 {
			break
		}
		if headers++; headers > maxPartHeaders {
			return p, nil, fmt.Errorf("%w: too many part headers", errMultipart)
		}
		n, v, found := bytes.Cut(line, []byte(":"))
		name := string(n)
		if !found || !validHeaderName(name) {
			return p, nil, fmt.Errorf("%w: malformed part header line", errMultipart)
		}
		v = bytes.TrimRight(v, " \t")
		if len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
			v = bytes.Clone(v) // appended to: not in place
		}
		for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
			cont, after, ok := headerLine(b)
			if !ok {
				return p, nil, errHeadersUnterminated
			}
			v = append(append(v, ' '), bytes.Trim(cont, " \t")...)
			b = after
		}
		value := string(v)
		for i := 0; i < len(value); i++ {
			if c := value[i]; c < 0x20 && c != '\t' || c == 0x7f {
				return p, nil, fmt.Errorf("%w: malformed part header line", errMultipart)
			}
		}
		value = strings.TrimLeft(value, " \t")
		switch {
		case strings.ContainsRune(name, ' '):
		case strings.EqualFold(name, "Content-Type") && !haveType:
			p.contentType, haveType = value, true
		case strings.EqualFold(name, "Content-Transfer-Encoding") && !haveCTE:
			qp, haveCTE = strings.EqualFold(value, "quoted-printable"), true
		}
	}
	if start-len(b) > maxSubHeaderBytes {
		return p, nil, errPartHeadersTooLarge
	}
	// Content, up to the line ending before the next delimiter line; a
	// delimiter right at its start leaves it empty.
	end, next := -1, -1 // content's end; where the delimiter line starts
	if bytes.HasPrefix(b, []byte(dash)) && endsBoundary(b[len(dash):]) {
		end, next = 0, 0
	}
	sep := []byte(nl + dash)
	for off := 0; end < 0; {
		i := bytes.Index(b[off:], sep)
		if i < 0 {
			return p, nil, fmt.Errorf("%w: part never ends", errMultipart)
		}
		if endsBoundary(b[off+i+len(sep):]) {
			end, next = off+i, off+i+len(nl)
		} else {
			off += i + 1
		}
	}
	p.content = b[:end:end]
	if qp {
		decoded, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(p.content)))
		if err != nil {
			return p, nil, fmt.Errorf("%w: %v", errMultipart, err)
		}
		p.content = decoded
	}
	return p, b[next:], nil
}

// endsBoundary reports whether what follows "--boundary" makes it a
// delimiter, as mime/multipart sees it: LWSP, a line end, "--" or the end
// of the body. (The delimiter line must then be well formed.)
func endsBoundary(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	switch b[0] {
	case ' ', '\t', '\r', '\n':
		return true
	case '-':
		return len(b) > 1 && b[1] == '-'
	}
	return false
}

// headerLine returns the first line of b without its LF or CRLF, and the
// rest; ok is false when b holds no LF.
func headerLine(b []byte) (line, rest []byte, ok bool) {
	line, rest, ok = cutLine(b)
	if !ok {
		return nil, nil, false
	}
	line = line[:len(line)-1]
	return bytes.TrimSuffix(line, []byte("\r")), rest, true
}

// cutLine returns the first line of b with its '\n', and the rest; ok is
// false when b holds no '\n' (line is then all of b).
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil, false
	}
	return b[:i+1], b[i+1:], true
}

func isDelimiter(line []byte, dash, nl string) bool {
	t, found := strings.CutPrefix(string(line), dash)
	return found && strings.TrimLeft(t, " \t") == nl
}

// isCloseDelimiter accepts "--boundary--" with optional LWSP and the line
// ending, or without it at the end of the body (nl "" accepts only that).
func isCloseDelimiter(line []byte, dash, nl string) bool {
	t, found := strings.CutPrefix(string(line), dash+"--")
	if !found {
		return false
	}
	t = strings.TrimLeft(t, " \t")
	return t == "" || t == nl
}

// validHeaderName reports whether name is an RFC 7230 token, spaces
// allowed, as net/textproto accepts it.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c != ' ' && !isTokenChar(c) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
