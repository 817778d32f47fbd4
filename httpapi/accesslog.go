package httpapi

import (
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/pgtables/pgtables/odata"
)

// accessRecord is what the access log says of a request. Empty optional
// fields (error code, client request id, auth, subject, user agent) are
// left out of the line.
type accessRecord struct {
	level                    slog.Level
	operation, method        string
	account, table           string
	status                   int
	errorCode                string
	elapsed                  time.Duration
	requestID, clientID      string
	remoteIP                 netip.Addr // invalid: unknown, written as ""
	bytesIn, bytesOut        int64
	auth, subject, userAgent string
}

// durationMS is the request's duration in milliseconds, to the
// microsecond.
func (a *accessRecord) durationMS() float64 { return float64(a.elapsed.Microseconds()) / 1000 }

func (a *accessRecord) ip() string {
	if a.remoteIP.IsValid() {
		return a.remoteIP.String()
	}
	return ""
}

// record is the line as a slog record, for any handler.
func (a *accessRecord) record(now time.Time) slog.Record {
	attrs := make([]slog.Attr, 0, 16)
	attrs = append(attrs,
		slog.String("operation", a.operation),
		slog.String("method", a.method),
		slog.String("account", a.account),
		slog.String("table", a.table),
		slog.Int("status", a.status),
	)
	if a.errorCode != "" {
		attrs = append(attrs, slog.String("error_code", a.errorCode))
	}
	attrs = append(attrs,
		slog.Float64("duration_ms", a.durationMS()),
		slog.String("request_id", a.requestID),
	)
	if a.clientID != "" {
		attrs = append(attrs, slog.String("client_request_id", a.clientID))
	}
	attrs = append(attrs,
		slog.String("remote_ip", a.ip()),
		slog.Int64("bytes_in", a.bytesIn),
		slog.Int64("bytes_out", a.bytesOut),
	)
	if a.auth != "" {
		attrs = append(attrs, slog.String("auth", a.auth))
	}
	if a.subject != "" {
		attrs = append(attrs, slog.String("subject", a.subject))
	}
	if a.userAgent != "" {
		attrs = append(attrs, slog.String("user_agent", a.userAgent))
	}
	rec := slog.NewRecord(now, a.level, "request", 0)
	rec.AddAttrs(attrs...)
	return rec
}

// appendJSON appends the line as slog's JSONHandler would write the
// record (same keys, order and values), without its reflection and
// per-attribute dispatch, newline included.
func (a *accessRecord) appendJSON(dst []byte, now time.Time) []byte {
	str := func(dst []byte, key, v string) []byte {
		dst = append(dst, ',', '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
		return odata.AppendJSONString(dst, v)
	}
	num := func(dst []byte, key string, v int64) []byte {
		dst = append(dst, ',', '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
		return strconv.AppendInt(dst, v, 10)
	}
	dst = append(dst, `{"time":"`...)
	dst = now.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","level":`...)
	dst = odata.AppendJSONString(dst, a.level.String())
	dst = append(dst, `,"msg":"request"`...)
	dst = str(dst, "operation", a.operation)
	dst = str(dst, "method", a.method)
	dst = str(dst, "account", a.account)
	dst = str(dst, "table", a.table)
	dst = num(dst, "status", int64(a.status))
	if a.errorCode != "" {
		dst = str(dst, "error_code", a.errorCode)
	}
	// encoding/json's form of a float64 (slog's), which is strconv's 'f'
	// form for every duration in range: 1e-6 <= ms < 1e21, or 0.
	dst = append(dst, `,"duration_ms":`...)
	dst = strconv.AppendFloat(dst, a.durationMS(), 'f', -1, 64)
	dst = str(dst, "request_id", a.requestID)
	if a.clientID != "" {
		dst = str(dst, "client_request_id", a.clientID)
	}
	dst = append(dst, `,"remote_ip":"`...)
	if a.remoteIP.IsValid() {
		dst = a.remoteIP.AppendTo(dst)
	}
	dst = append(dst, '"')
	dst = num(dst, "bytes_in", a.bytesIn)
	dst = num(dst, "bytes_out", a.bytesOut)
	if a.auth != "" {
		dst = str(dst, "auth", a.auth)
	}
	if a.subject != "" {
		dst = str(dst, "subject", a.subject)
	}
	if a.userAgent != "" {
		dst = str(dst, "user_agent", a.userAgent)
	}
	return append(dst, '}', '\n')
}
