package store

import (
	"strconv"
	"strings"

	"github.com/pgtables/pgtables/odata"
)

// Match is the parsed If-Match condition of a write.
type Match struct {
	kind matchKind
	ts   int64
	xmin uint32
	keys uint32 // keyHash of the entity the ETag was issued for
}

type matchKind uint8

const (
	matchNone  matchKind = iota // no If-Match: an upsert
	matchAny                    // If-Match: *
	matchETag                   // one of our ETags
	matchNever                  // a well-formed ETag that we cannot have issued
)

// MatchAny is If-Match: *.
var MatchAny = Match{kind: matchAny}

// Conditional reports whether the write requires an existing entity.
func (m Match) Conditional() bool { return m.kind != matchNone }

// forKeys returns the condition as it applies to the entity (pk, rk): an
// ETag issued for another entity can never match it, even one written by
// the same batch with the same Timestamp and xmin.
func (m Match) forKeys(pk, rk string) Match {
	if m.kind == matchETag && m.keys != keyHash(pk, rk) {
		return Match{kind: matchNever}
	}
	return m
}

// The ETag is W/"datetime'<Timestamp, 7 digits, ':' as %3A>'-<xmin>-<keys>".
// It keeps Azure's shape, which some user code and tools parse, and adds
// the row's xmin so that two versions never share an ETag even if a clock
// steps back or an entity is deleted and re-inserted within one tick, and a
// hash of the keys so that the entities of one batch, which share Timestamp
// and xmin, each get their own. This is the one place that knows the
// format; an engine without xmin would put a version column here instead.
const (
	etagPrefix = `W/"datetime'`
	etagMiddle = `'-`
)

// keyHash is FNV-1a over the keys, which cannot contain U+0000; a page's
// rows give them as the driver's bytes (see collectPage).
func keyHash[K string | []byte](pk, rk K) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(pk); i++ {
		h ^= uint32(pk[i])
		h *= 16777619
	}
	h *= 16777619 // the separator, a zero byte
	for i := 0; i < len(rk); i++ {
		h ^= uint32(rk[i])
		h *= 16777619
	}
	return h
}

func formatETag(ts int64, xmin uint32, pk, rk string) string {
	return formatETagHash(ts, xmin, keyHash(pk, rk))
}

// formatETagHash writes the ETag with one allocation.
func formatETagHash(ts int64, xmin, keys uint32) string {
	var b [80]byte
	return string(appendETag(b[:0], ts, xmin, keys))
}

// appendETag appends the ETag of formatETagHash to dst, the Timestamp's
// colons (at 13 and 16 of the fixed form of four-digit years) by position:
// every entity of a page has an ETag.
func appendETag(dst []byte, ts int64, xmin, keys uint32) []byte {
	dst = append(dst, etagPrefix...)
	var dt [32]byte
	if d := odata.AppendDateTime(dt[:0], ts, true); len(d) == len("2006-01-02T15:04:05.0000000Z") {
		dst = append(append(append(append(append(dst, d[:13]...), "%3A"...), d[14:16]...), "%3A"...), d[17:]...)
	} else {
		for _, c := range d {
			if c == ':' {
				dst = append(dst, "%3A"...)
			} else {
				dst = append(dst, c)
			}
		}
	}
	dst = append(dst, etagMiddle...)
	dst = strconv.AppendUint(dst, uint64(xmin), 10)
	dst = append(dst, '-')
	dst = strconv.AppendUint(dst, uint64(keys), 16)
	return append(dst, '"')
}

// ParseMatch parses the values of the If-Match header; nil means the
// header is absent, which is no condition. "*" matches any entity; one of
// our ETags matches that version; any other weak entity tag (W/"...", or
// w/"..." as some clients write it), such as one issued by Azure, matches
// nothing. Everything else is invalid input: a header that is present but
// empty (never taken for an absent one, which would turn an update into an
// upsert), more than one value, a strong entity tag, which pgtables never
// issues, and any other text.
func ParseMatch(values []string) (Match, error) {
	if values == nil {
		return Match{}, nil
	}
	v := strings.TrimSpace(strings.Join(values, ", "))
	if len(values) == 1 {
		if v == "*" {
			return MatchAny, nil
		}
		if ts, xmin, keys, ok := parseETag(v); ok {
			return Match{kind: matchETag, ts: ts, xmin: xmin, keys: keys}, nil
		}
		if weakETag(v) {
			return Match{kind: matchNever}, nil
		}
	}
	return Match{}, odata.Detailf(odata.ErrInvalidInput,
		"The etag value '%s' specified in one of the request headers is not valid. Please make sure only one etag value is specified and is valid.", odata.Truncate(v, 128))
}

func parseETag(v string) (ts int64, xmin, keys uint32, ok bool) {
	rest, found := strings.CutPrefix(v, etagPrefix)
	if !found || !strings.HasSuffix(rest, `"`) {
		return 0, 0, 0, false
	}
	rest = rest[:len(rest)-1]
	i := strings.LastIndex(rest, etagMiddle)
	if i < 0 {
		return 0, 0, 0, false
	}
	xs, ks, found := strings.Cut(rest[i+len(etagMiddle):], "-")
	if !found {
		return 0, 0, 0, false
	}
	x, err1 := strconv.ParseUint(xs, 10, 32)
	k, err2 := strconv.ParseUint(ks, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false
	}
	ts, ok = odata.ParseDateTime(strings.ReplaceAll(rest[:i], "%3A", ":"))
	if !ok || formatETagHash(ts, uint32(x), uint32(k)) != v {
		return 0, 0, 0, false
	}
	return ts, uint32(x), uint32(k), true
}

// weakETag accepts an RFC 9110 weak entity-tag: W/ (or w/) and a quoted
// string of visible characters other than '"'.
func weakETag(v string) bool {
	if len(v) < 2 || v[0] != 'W' && v[0] != 'w' || v[1] != '/' {
		return false
	}
	v = v[2:]
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		if c := v[i]; c == '"' || c < 0x21 || c == 0x7f {
			return false
		}
	}
	return true
}
