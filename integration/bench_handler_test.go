package integration

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/store"
)

// BenchmarkHandler measures the server's own work per request: the handler
// is called directly, without TCP, on a real database, so allocs/op and
// B/op are the service's (the database round trip is in ns/op).
//
//	go test ./integration -run '^$' -bench Handler -benchmem
func BenchmarkHandler(b *testing.B) {
	e := newEnvWith(b, store.Options{})
	ctx := context.Background()
	c, table := e.newTable()
	entity := func(pk, rk string) string {
		return fmt.Sprintf(`{"PartitionKey":%q,"RowKey":%q,"Name":"Customer number 00000001 of the benchmark","Email":"customer00000001@example.com","Cat":1,"Score":0.14285714285714285,"Big@odata.type":"Edm.Int64","Big":"1000000007","Active":false,"Since@odata.type":"Edm.DateTime","Since":"2026-01-02T03:04:06.1234567Z","Ref@odata.type":"Edm.Guid","Ref":"c9da6455-213d-42c9-9a79-000000000001","Blob@odata.type":"Edm.Binary","Blob":"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSYnKCkqKywtLi8w","Note":"A note long enough to make the entity about five hundred bytes on the wire."}`, pk, rk)
	}
	for i := 0; i < 1000; i++ {
		if _, err := c.AddEntity(ctx, []byte(entity("scan", fmt.Sprintf("r%04d", i))), nil); err != nil {
			b.Fatal(err)
		}
	}
	serve := func(b *testing.B, method, path string, header map[string]string, body string, want int) {
		date := time.Now().UTC().Format(http.TimeFormat)
		rawPath, _, _ := strings.Cut(path, "?")
		key, _ := base64.StdEncoding.DecodeString(httpapi.DevKey)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(date + "\n/" + httpapi.DevAccount + rawPath))
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = "127.0.0.1:10002"
		req.Header.Set("x-ms-date", date)
		req.Header.Set("x-ms-version", "2019-02-02")
		req.Header.Set("Accept", "application/json;odata=minimalmetadata")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "SharedKeyLite "+httpapi.DevAccount+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		e.srv.ServeHTTP(w, req)
		if w.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.String())
		}
	}
	base := "/" + httpapi.DevAccount + "/" + table
	b.Run("point-read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serve(b, "GET", base+"(PartitionKey='scan',RowKey='r0500')", nil, "", 200)
		}
	})
	var n atomic.Int64
	b.Run("insert", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serve(b, "POST", base, map[string]string{"Prefer": "return-no-content"}, entity("ins", fmt.Sprint(n.Add(1))), 204)
		}
	})
	b.Run("partition-scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serve(b, "GET", base+"()?$filter=PartitionKey%20eq%20'scan'", nil, "", 200)
		}
	})
	b.Run("batch-insert", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pk := fmt.Sprintf("batch%d", n.Add(1))
			var body bytes.Buffer
			body.WriteString("--batch_a\r\nContent-Type: multipart/mixed; boundary=changeset_b\r\n\r\n")
			for j := 0; j < 100; j++ {
				fmt.Fprintf(&body, "--changeset_b\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nPOST http://127.0.0.1:10002%s HTTP/1.1\r\nContent-Type: application/json\r\nPrefer: return-no-content\r\n\r\n%s\r\n", base, entity(pk, fmt.Sprint(j)))
			}
			body.WriteString("--changeset_b--\r\n--batch_a--\r\n")
			serve(b, "POST", "/"+httpapi.DevAccount+"/$batch", map[string]string{"Content-Type": "multipart/mixed; boundary=batch_a"}, body.String(), 202)
		}
	})
}
