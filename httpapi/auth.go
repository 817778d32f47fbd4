package httpapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pgtables/pgtables/store"
)

// Authentication errors; errors.go maps them to Azure's codes.
var (
	// errAuthFailed: a credential that does not verify (403).
	errAuthFailed = errors.New("authentication failed")
	// errNoAuthInfo: no credential where a bearer token would do (401,
	// with the challenge).
	errNoAuthInfo = errors.New("no authentication information")
	// errInvalidAuthInfo: a bearer token that does not verify (401, with
	// the challenge).
	errInvalidAuthInfo = errors.New("invalid authentication information")
	// errKeyAuthNotPermitted: Shared Key or SAS on an account that
	// refuses them (403).
	errKeyAuthNotPermitted = errors.New("key based authentication not permitted")
)

// authError is a failed authentication with the detail Azure puts in
// AuthenticationErrorDetail: it tells a developer which string was signed,
// or why a token was refused. kind is one of the errors above.
type authError struct {
	kind   error
	detail string
}

func (e *authError) Error() string { return e.kind.Error() + ": " + e.detail }
func (e *authError) Unwrap() error { return e.kind }

func authFailed(format string, args ...any) error {
	return &authError{kind: errAuthFailed, detail: fmt.Sprintf(format, args...)}
}

// Authentication schemes, as the metrics and the access log name them.
const (
	schemeSharedKey     = "shared_key"
	schemeSharedKeyLite = "shared_key_lite"
	schemeSAS           = "sas"
	schemeBearer        = "bearer"
	schemeNone          = "none"  // no credential at all
	schemeOther         = "other" // an Authorization scheme not spoken here
)

// Outcomes of an authentication, as the metrics name them.
const (
	authSuccess     = "success"
	authFailure     = "failure"     // the credential does not verify
	authRefused     = "refused"     // the scheme is not allowed here (key on a keyless account, bearer over http)
	authUnavailable = "unavailable" // could not be checked now (an issuer's keys unreachable)
)

// authenticateRequest authenticates a request with Shared Key, Shared Key
// Lite, a SAS or a bearer token, and returns its grant (nil for an
// account key: the key may do anything). It records the scheme and the
// outcome for the metrics and the access log.
func (s *Server) authenticateRequest(rq *request) (grant, error) {
	r := rq.r()
	authz := headerValue(r.Header, "Authorization")
	scheme, cred, _ := strings.Cut(authz, " ")
	var label string
	var g grant
	var err error
	switch {
	case authz == "" && rq.query.Has("sig"):
		label = schemeSAS
		if err = keyAllowed(rq.acct); err == nil {
			var sg *sasGrant
			if sg, err = s.authenticateSAS(rq); err == nil {
				g = sg
			}
		}
	case authz == "" && s.cfg.Bearer != nil:
		// The SDKs' bearer policies learn the tenant from this challenge.
		label, err = schemeNone, &authError{kind: errNoAuthInfo, detail: "The request has no Authorization header; send a bearer token."}
	case scheme == "Bearer" && s.cfg.Bearer != nil:
		label = schemeBearer
		g, err = s.authenticateBearer(rq, strings.TrimSpace(cred))
	default:
		switch scheme {
		case "SharedKey":
			label = schemeSharedKey
		case "SharedKeyLite":
			label = schemeSharedKeyLite
		case "":
			label = schemeNone
		default:
			label = schemeOther
		}
		if label == schemeSharedKey || label == schemeSharedKeyLite {
			err = keyAllowed(rq.acct)
		}
		if err == nil {
			err = s.authenticate(r, rq.t, rq.acct, rq.query)
		}
	}
	s.ops.metrics.authentication(label, authOutcome(err))
	if st := stateOf(r); st != nil {
		st.auth = label
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

// keyAllowed refuses Shared Key and SAS (which the account key signs) on
// an account that accepts bearer tokens only, as Azure does when an
// account's AllowSharedKeyAccess is false.
func keyAllowed(acct *Account) error {
	if acct.RefuseSharedKey {
		return &authError{kind: errKeyAuthNotPermitted, detail: "The account " + acct.Name + " accepts bearer tokens only."}
	}
	return nil
}

// authOutcome names the outcome of an authentication that ended in err.
func authOutcome(err error) string {
	switch {
	case err == nil:
		return authSuccess
	case errors.Is(err, errKeyAuthNotPermitted), errors.Is(err, errBearerOverHTTP):
		return authRefused
	case errors.Is(err, store.ErrUnavailable):
		return authUnavailable
	}
	return authFailure
}

// authenticate checks the Shared Key or Shared Key Lite signature of r.
// The canonicalized resource is built from the raw request path, exactly
// as the client sent it, because that is what each SDK signs.
func (s *Server) authenticate(r *http.Request, t *target, acct *Account, query url.Values) error {
	h := headerValue(r.Header, "Authorization")
	if h == "" {
		return authFailed("The request has no Authorization header.")
	}
	scheme, cred, _ := strings.Cut(h, " ")
	lite := false
	switch scheme {
	case "SharedKeyLite":
		lite = true
	case "SharedKey":
	default:
		return authFailed("The authorization scheme %q is not supported.", scheme)
	}
	name, sig, ok := strings.Cut(strings.TrimSpace(cred), ":")
	if !ok || name != acct.Name {
		return authFailed("The account in the Authorization header does not match the request's account %q.", acct.Name)
	}
	var sigBuf [48]byte
	got, err := decodeSignature(sigBuf[:], sig)
	if err != nil {
		return authFailed("The signature is not valid base64.")
	}
	date := headerValue(r.Header, "X-Ms-Date")
	if date == "" {
		date = headerValue(r.Header, "Date")
	}
	if date == "" {
		return authFailed("Request date header not specified.")
	}
	when, err := s.dates.parse(date)
	if err != nil {
		return authFailed("The date header '%s' is not an RFC 1123 date.", date)
	}
	now := s.now()
	switch {
	case now.Sub(when) > s.cfg.ClockSkew:
		return authFailed("Request date header too old: '%s'.", date)
	case when.Sub(now) > s.cfg.ClockSkew:
		return authFailed("Request date header is in the future: '%s'.", date)
	}
	// The string to sign is built in a pooled buffer: every request is
	// verified, and concatenating it cost two allocations of its size.
	bp, _ := s.signBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer s.signBufs.Put(bp)
	var tried []string
	for _, resource := range canonicalResources(t, query) {
		toSign := (*bp)[:0]
		if !lite {
			toSign = append(append(toSign, r.Method...), '\n')
			toSign = append(append(toSign, headerValue(r.Header, "Content-Md5")...), '\n')
			toSign = append(append(toSign, headerValue(r.Header, "Content-Type")...), '\n')
		}
		toSign = append(append(toSign, date...), '\n')
		toSign = append(toSign, resource...)
		*bp = toSign
		if acct.signedBy(toSign, got) {
			return nil
		}
		tried = append(tried, string(toSign))
	}
	return authFailed("The MAC signature found in the HTTP request '%s' is not the same as any computed signature. Server used following string to sign: '%s'.", sig, tried[0])
}

// decodeSignature decodes a base64 signature into buf when it fits (an
// HMAC-SHA256 signature, 32 bytes in 44 characters, does), so that
// verifying allocates nothing for it; a longer one, which can match nothing
// but must still be told from bad base64, is decoded the usual way.
func decodeSignature(buf []byte, sig string) ([]byte, error) {
	var src [64]byte
	if len(sig) > len(src) || base64.StdEncoding.DecodedLen(len(sig)) > len(buf) {
		return base64.StdEncoding.DecodeString(sig)
	}
	n, err := base64.StdEncoding.Decode(buf, src[:copy(src[:], sig)])
	return buf[:n], err
}

// dateCache remembers the last date header parsed: concurrent clients send
// the same second's date many times, and parsing one is a noticeable
// share of verifying a request.
type dateCache struct {
	last atomic.Pointer[parsedDate]
}

type parsedDate struct {
	text string
	when time.Time
}

// parse is http.ParseTime, answered from the cache when date is the last
// one parsed.
func (c *dateCache) parse(date string) (time.Time, error) {
	if p := c.last.Load(); p != nil && p.text == date {
		return p.when, nil
	}
	when, err := http.ParseTime(date)
	if err != nil {
		return when, err
	}
	c.last.Store(&parsedDate{text: date, when: when})
	return when, nil
}

// canonicalResources returns "/" + account + raw path [+ "?comp=" + comp].
// A path-style request to the secondary may be signed with or without the
// -secondary suffix in the path; both are accepted.
func canonicalResources(t *target, query url.Values) []string {
	path := t.rawPath
	if path == "" {
		path = "/"
	}
	comp := ""
	if query.Has("comp") {
		comp = "?comp=" + query.Get("comp")
	}
	res := []string{"/" + t.account + path + comp}
	if t.secondary && t.pathStyle {
		secondary := "/" + t.account + "-secondary"
		res = append(res, "/"+t.account+strings.Replace(path, secondary, "/"+t.account, 1)+comp)
		if p, ok := strings.CutPrefix(path, secondary+"/"+t.account+"/"); ok {
			// The Python SDK's secondary service root (route): it signs
			// the primary URL's path.
			res = append(res, "/"+t.account+"/"+t.account+"/"+p+comp)
		}
	}
	return res
}

// clockSkew is how far a signed request's date may be from the server's
// time, as in Azure.
const defaultClockSkew = 15 * time.Minute
