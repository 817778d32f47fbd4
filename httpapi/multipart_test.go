package httpapi

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"
)

// mimeParts splits body with mime/multipart, the reference splitMultipart
// must agree with.
func mimeParts(body []byte, boundary string) ([]mimePart, error) {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var parts []mimePart
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return parts, nil
		}
		if err != nil {
			return nil, err
		}
		content, err := io.ReadAll(p)
		if err != nil {
			return nil, err
		}
		parts = append(parts, mimePart{contentType: p.Header.Get("Content-Type"), content: content})
	}
}

// checkSplit fails unless splitMultipart and mime/multipart agree on body:
// both refuse it, or both find the same parts. The one difference allowed
// is errHeadersUnterminated, where mime/multipart ends the body early.
func checkSplit(t *testing.T, body []byte, boundary string) {
	t.Helper()
	got, gotErr := splitMultipart(body, boundary)
	want, wantErr := mimeParts(body, boundary)
	if (errors.Is(gotErr, errHeadersUnterminated) || errors.Is(gotErr, errPartHeadersTooLarge)) && wantErr == nil {
		return // stricter than mime/multipart on purpose
	}
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("boundary %q, body %q:\nsplitMultipart: %d parts, %v\nmime/multipart: %d parts, %v", boundary, body, len(got), gotErr, len(want), wantErr)
	}
	if gotErr != nil {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("boundary %q, body %q: %d parts, mime/multipart %d", boundary, body, len(got), len(want))
	}
	for i := range got {
		if got[i].contentType != want[i].contentType || !bytes.Equal(got[i].content, want[i].content) {
			t.Fatalf("boundary %q, body %q, part %d:\ngot  %q %q\nwant %q %q", boundary, body, i,
				got[i].contentType, got[i].content, want[i].contentType, want[i].content)
		}
	}
}

func TestSplitMultipart(t *testing.T) {
	t.Parallel()
	for _, fx := range batchFixtures {
		_, params, err := mime.ParseMediaType(fx.ct)
		if err != nil {
			t.Fatal(err)
		}
		checkSplit(t, []byte(fx.body), params["boundary"])
	}
	for _, body := range []string{
		"",
		"--b--",
		"--b--\r\n",
		"--b--  \r\nepilogue",
		"preamble\r\n--b\r\nContent-Type: x\r\n\r\nhello\r\n--b--\r\n",
		"--b\nContent-Type: x\n\nhello\n--b\n\nworld\n--b--\n",    // LF throughout
		"--b\r\nContent-Type: x\r\n\r\n--b--\r\n",                 // empty content, delimiter at once
		"--b\r\n\r\n\r\n--b--\r\n",                                // empty content
		"--b\r\n\r\na\r\n--bx\r\n--b-\r\n--b--\r\n",               // boundary-like lines inside
		"--b\r\n\r\na\r\n--b x\r\n--b--\r\n",                      // a delimiter with junk
		"--b \t\r\n\r\na\r\n--b--",                                // LWSP after the delimiter, no final line end
		"--b\r\nContent-Type: a\r\n\tb\r\nX: y\r\n\r\nc\r\n--b--", // folded header
		"--b\r\nContent-Type : a\r\n\r\nc\r\n--b--",               // a name with a space
		"--b\r\n content-type: a\r\n\r\nc\r\n--b--",               // leading space
		"--b\r\nContent-Type a\r\n\r\nc\r\n--b--",                 // no colon
		"--b\r\nContent-Type: a\x01\r\n\r\nc\r\n--b--",            // control character
		"--b\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=3Db=\r\nc\r\n--b--\r\n",
		"--b\r\n\r\nunterminated",
		"--b\r\nContent-Type: a",
		"--b\r\n\r\na\n--b\r\n--b--\r\n", // LF before a delimiter in CRLF mode
		"--b\r\n\r\na\r\n--b--x\r\n",
	} {
		checkSplit(t, []byte(body), "b")
	}
}

// FuzzSplitMultipart checks splitMultipart against mime/multipart.
func FuzzSplitMultipart(f *testing.F) {
	for _, fx := range batchFixtures {
		_, params, _ := mime.ParseMediaType(fx.ct)
		f.Add([]byte(fx.body), params["boundary"])
	}
	f.Add([]byte("--b\nContent-Type: x\n\nhello\n--b\n\nworld\n--b--\n"), "b")
	f.Add([]byte("--b\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=3Db=\r\nc\r\n--b--\r\n"), "b")
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		if len(boundary) > 70 || strings.ContainsAny(boundary, "\r\n") {
			return // not a boundary mime.ParseMediaType hands over
		}
		checkSplit(t, body, boundary)
	})
}
