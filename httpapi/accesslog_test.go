package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

// tokens lists a JSON document's tokens in order (keys included), with
// numbers as written.
func tokens(t *testing.T, doc []byte) []any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var out []any
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("%s: %v", doc, err)
		}
		out = append(out, tok)
	}
}

func TestAccessLineAsJSONHandlerWritesIt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 3, 4, 5, 60708000, time.UTC)
	full := accessRecord{
		level: slog.LevelWarn, operation: "query_entities", method: "GET", account: "acct", table: "t1",
		status: 503, errorCode: "ServerBusy", elapsed: 1234567 * time.Microsecond,
		requestID: "req-1", clientID: "client \"quoted\" \\ \n\t\x01 é \xff <&>",
		remoteIP: netip.MustParseAddr("2001:db8::1"), bytesIn: 12, bytesOut: 345678,
		auth: "SharedKey", subject: "user@example.com", userAgent: "azsdk-go-aztables/v1.4.0 (go1.25; linux)",
	}
	for name, rec := range map[string]accessRecord{
		"every field": full,
		"no optional field": {level: slog.LevelInfo, operation: "get_entity", method: "GET", account: "a", status: 200,
			elapsed: 87 * time.Microsecond, requestID: "r", remoteIP: netip.MustParseAddr("127.0.0.1")},
		"no address, no time": {level: slog.LevelInfo, operation: "unknown", method: "MERGE", status: 400},
		"sub-millisecond":     {level: slog.LevelInfo, elapsed: time.Microsecond, status: 204},
		"minutes":             {level: slog.LevelInfo, elapsed: 3*time.Minute + 7*time.Microsecond, status: 201},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var want bytes.Buffer
			if err := slog.NewJSONHandler(&want, nil).Handle(context.Background(), rec.record(now)); err != nil {
				t.Fatal(err)
			}
			got := rec.appendJSON(nil, now)
			if !bytes.HasSuffix(got, []byte("}\n")) {
				t.Errorf("line %q does not end in a newline", got)
			}
			if g, w := tokens(t, got), tokens(t, want.Bytes()); !reflect.DeepEqual(g, w) {
				t.Errorf("line\n %s\nslog's\n %s", got, want.Bytes())
			}
		})
	}
}
