package odata

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Continuation tokens carry the next PartitionKey, RowKey or table name to
// return (rest-protocol.md §5.7). Ours are 1!<len>!<base64url of the key,
// unpadded>, <len> being the length of the encoded part; they contain only
// [A-Za-z0-9_!-], so no client or proxy mangles them in a header or query.

// EncodeContinuation makes a continuation token from a key.
func EncodeContinuation(key string) string {
	n := base64.RawURLEncoding.EncodedLen(len(key))
	b := make([]byte, 0, 4+20+n)
	b = append(b, "1!"...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '!')
	b = base64.RawURLEncoding.AppendEncode(b, []byte(key))
	return string(b)
}

// DecodeContinuation reverses EncodeContinuation.
//
// It also takes Azure's tokens (1!<len>!<standard base64 with '=' written
// as '-'>) and Azurite's (plain standard base64), so a token produced by
// another server still works. Where a token reads validly both as ours and
// as Azure's (a body of a multiple of four characters ending in '-'), ours
// wins: our own tokens must always come back unchanged.
func DecodeContinuation(token string) (string, error) {
	if rest, ok := strings.CutPrefix(token, "1!"); ok {
		lenText, body, ok := strings.Cut(rest, "!")
		n, err := strconv.Atoi(lenText)
		if !ok || err != nil || n != len(body) || lenText != strconv.Itoa(n) {
			return "", errToken(token)
		}
		if k, ok := decodeTokenBody(base64.RawURLEncoding, body); ok {
			return k, nil
		}
		// Azure: standard alphabet, padding written as '-'.
		if len(body)%4 == 0 {
			padded := []byte(body)
			for i := len(padded) - 1; i >= len(padded)-2 && i >= 0 && padded[i] == '-'; i-- {
				padded[i] = '='
			}
			if k, ok := decodeTokenBody(base64.StdEncoding, string(padded)); ok {
				return k, nil
			}
		}
		return "", errToken(token)
	}
	if k, ok := decodeTokenBody(base64.StdEncoding, token); ok {
		return k, nil
	}
	return "", errToken(token)
}

// decodeTokenBody decodes strictly (no ignored newlines, canonical padding
// bits) and insists on valid UTF-8, since keys are always text.
func decodeTokenBody(enc *base64.Encoding, s string) (string, bool) {
	if strings.ContainsAny(s, "\r\n") {
		return "", false
	}
	b, err := enc.Strict().DecodeString(s)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	// Tokens name keys and table names, or (with U+0001 appended) the
	// least key after one; U+0000 would not even reach PostgreSQL.
	if bytes.IndexByte(b, 0) >= 0 {
		return "", false
	}
	return string(b), true
}

func errToken(token string) error {
	return Detailf(ErrInvalidInput, "The continuation token '%s' is not valid.", truncateForMessage(token))
}
