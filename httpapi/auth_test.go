package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"testing"
)

// The vectors are from rest-protocol.md §8.2 and §8.3, checked there
// against aztables v1.3.0.
func TestCanonicalResourceVectors(t *testing.T) {
	t.Parallel()
	const date = "Sun, 22 Nov 2026 01:38:33 GMT"
	key, _ := base64.StdEncoding.DecodeString(DevKey)
	sign := func(s string) string {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(s))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	tests := []struct {
		method, uri, contentType string
		lite                     bool
		want                     string
	}{
		{"GET", "/devstoreaccount1/Tables", "", true, "JKsDTmklkQ9qQOcXV3nIAlE7sWNNgjNvRweTXmPy+8E="},
		{"GET", "/devstoreaccount1/mytable?comp=acl", "", true, "1whAKKvMfGHAC7PXRaujYJI3c+zjR4o1hzEVh4Zj2o8="},
		{"GET", "/devstoreaccount1/mytable(PartitionKey='p%27%271',RowKey='r%201')", "", true, "Cu4zET/8x9JNQeHvegkBWGRNEU+YoENvhNIHeK+HDtg="},
		{"GET", "/devstoreaccount1?comp=properties&restype=service", "", true, "V+vI2tiitRXGvb670Y+ji2/pvPTM8EpC1FzbraovULU="},
		{"GET", "/devstoreaccount1/mytable()?%24filter=x", "", true, "c94iIdQS1ROqybEJT7EVODy4bFpHt3Z1J+K5YbDFX00="},
		{"GET", "/devstoreaccount1/Tables", "", false, "ZtYiB485gbeJ37nP7+oZhC+1J5fe805hsMV+UuCIgqM="},
		{"POST", "/devstoreaccount1/Tables", "application/json", false, "JQ4rxm/lR+lGZGBP/IFZ8zNNSJy753RVowiDWVbxMWM="},
	}
	for _, tt := range tests {
		tg, err := route("127.0.0.1:10002", tt.uri, devKnown, nil)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := url.ParseQuery(tg.rawQuery)
		res := canonicalResources(tg, q)[0]
		toSign := date + "\n" + res
		if !tt.lite {
			toSign = tt.method + "\n\n" + tt.contentType + "\n" + toSign
		}
		if got := sign(toSign); got != tt.want {
			t.Errorf("%s %s lite=%v: signed %q -> %s, want %s", tt.method, tt.uri, tt.lite, toSign, got, tt.want)
		}
	}
}

// TestSecondaryCanonicalResources: what a request to the secondary
// endpoint may have been signed over, besides its own path.
func TestSecondaryCanonicalResources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		uri  string
		want []string
	}{
		{"/devstoreaccount1-secondary/Tables", []string{"/devstoreaccount1/devstoreaccount1-secondary/Tables", "/devstoreaccount1/devstoreaccount1/Tables"}},
		{"/devstoreaccount1-secondary?restype=service&comp=stats", []string{"/devstoreaccount1/devstoreaccount1-secondary?comp=stats", "/devstoreaccount1/devstoreaccount1?comp=stats"}},
		// The Python SDK's form for a path-style endpoint: signed as the
		// primary URL /devstoreaccount1/.
		{"/devstoreaccount1-secondary/devstoreaccount1/?restype=service&comp=stats", []string{
			"/devstoreaccount1/devstoreaccount1-secondary/devstoreaccount1/?comp=stats",
			"/devstoreaccount1/devstoreaccount1/devstoreaccount1/?comp=stats",
			"/devstoreaccount1/devstoreaccount1/?comp=stats"}},
	}
	for _, tt := range tests {
		tg, err := route("127.0.0.1:10002", tt.uri, devKnown, nil)
		if err != nil || tg.kind == 0 {
			t.Fatalf("route(%q): %+v %v", tt.uri, tg, err)
		}
		q, _ := url.ParseQuery(tg.rawQuery)
		if got := canonicalResources(tg, q); !slices.Equal(got, tt.want) {
			t.Errorf("%s:\n got %q\nwant %q", tt.uri, got, tt.want)
		}
	}
}

func TestParseAccounts(t *testing.T) {
	t.Parallel()
	a, err := ParseAccounts("acct1:" + DevKey + ":" + base64.StdEncoding.EncodeToString([]byte("k2")) + "; acct2:" + DevKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 || len(a["acct1"].Keys) != 2 || len(a["acct2"].Keys) != 1 {
		t.Fatalf("got %+v", a)
	}
	for _, bad := range []string{"", "a:" + DevKey, "UPPER:" + DevKey, "acct1", "acct1:notbase64!", "acct1:" + DevKey + ";acct1:" + DevKey, "a-b-c:" + DevKey, "acct1:k:k:k"} {
		if _, err := ParseAccounts(bad); err == nil {
			t.Errorf("ParseAccounts(%q) accepted", bad)
		}
	}
}

func TestDateCacheParsesEachDate(t *testing.T) {
	t.Parallel()
	var c dateCache
	for _, tc := range []struct {
		date string
		ok   bool
	}{
		{"Mon, 02 Jan 2006 15:04:05 GMT", true},
		{"Mon, 02 Jan 2006 15:04:05 GMT", true}, // from the cache
		{"Mon, 02 Jan 2006 15:04:06 GMT", true},
		{"not a date", false},
		{"not a date", false}, // a failure is not cached as a success
		{"Mon, 02 Jan 2006 15:04:05 GMT", true},
	} {
		got, err := c.parse(tc.date)
		want, wantErr := http.ParseTime(tc.date)
		if (err == nil) != tc.ok || (wantErr == nil) != tc.ok || !got.Equal(want) {
			t.Errorf("parse(%q) = %v, %v; want %v, %v", tc.date, got, err, want, wantErr)
		}
	}
}

func TestDecodeSignature(t *testing.T) {
	t.Parallel()
	long := base64.StdEncoding.EncodeToString(make([]byte, 100))
	for _, sig := range []string{"", "AAAA", base64.StdEncoding.EncodeToString(make([]byte, 32)), long, "not base64!", long + "!"} {
		var buf [48]byte
		got, err := decodeSignature(buf[:], sig)
		want, wantErr := base64.StdEncoding.DecodeString(sig)
		if (err == nil) != (wantErr == nil) || err == nil && !bytes.Equal(got, want) {
			t.Errorf("decodeSignature(%q) = %x, %v; want %x, %v", sig, got, err, want, wantErr)
		}
	}
}
