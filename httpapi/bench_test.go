package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
	"time"
)

// Microbenchmarks of the HTTP layer's hot paths (go test -bench . -benchmem).

func BenchmarkRouteEntity(b *testing.B) {
	const uri = "/devstoreaccount1/orders(PartitionKey='customer-00042',RowKey='order%2F2024%27%27000123')"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := route("127.0.0.1:10002", uri, devKnown, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSharedKeyLite(b *testing.B) {
	srv := New(Config{Version: "bench"}, nil, nil, nil)
	const uri = "/devstoreaccount1/orders(PartitionKey='p',RowKey='r')"
	t, err := route("127.0.0.1:10002", uri, devKnown, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, uri, nil)
	date := time.Now().UTC().Format(http.TimeFormat)
	key, _ := base64.StdEncoding.DecodeString(DevKey)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(date + "\n/" + DevAccount + uri))
	r.Header.Set("x-ms-date", date)
	r.Header.Set("Authorization", "SharedKeyLite "+DevAccount+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	acct := srv.cfg.Accounts[DevAccount]
	q := url.Values{}
	b.ReportAllocs()
	for b.Loop() {
		if err := srv.authenticate(r, t, acct, q); err != nil {
			b.Fatal(err)
		}
	}
}

func benchBatchBody(n int) (string, string) {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = insertPart("customer-00042", fmt.Sprintf("order-%06d", i))
	}
	return batch(parts...)
}

func BenchmarkReadBatch100(b *testing.B) {
	ct, body := benchBatchBody(100)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readBatch(ct, []byte(body)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAnswerBatch100 validates 100 inserts, runs them against a store
// double and writes the multipart answer.
func BenchmarkAnswerBatch100(b *testing.B) {
	ct, body := benchBatchBody(100)
	br, err := readBatch(ct, []byte(body))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rq, _ := newBatchTestRequest(b, "", "")
		w := newBatchWriter()
		if err := rq.answerBatch(w, br, &fakeBatchStore{}); err != nil {
			b.Fatal(err)
		}
		_ = w.finish()
	}
}

func benchAccessRecord() accessRecord {
	return accessRecord{
		level: slog.LevelInfo, operation: "get_entity", method: "GET", account: "devstoreaccount1", table: "bench",
		status: 200, elapsed: 1234 * time.Microsecond, requestID: "b3ff6639-7d5d-4d54-b305-f2d513974a9a",
		remoteIP: netip.MustParseAddr("127.0.0.1"), bytesOut: 420, auth: "SharedKeyLite", userAgent: "pgtables-bench",
	}
}

// BenchmarkAccessLineSlog is the access line through slog's JSONHandler.
func BenchmarkAccessLineSlog(b *testing.B) {
	rec := benchAccessRecord()
	h := slog.NewJSONHandler(io.Discard, nil)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = h.Handle(context.Background(), rec.record(now))
	}
}

// BenchmarkAccessLineJSON is the same line appended directly.
func BenchmarkAccessLineJSON(b *testing.B) {
	rec := benchAccessRecord()
	now := time.Now()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = rec.appendJSON(buf[:0], now)
	}
}
