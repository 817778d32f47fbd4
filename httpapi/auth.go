package httpapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

var errAuthFailed = errors.New("authentication failed")

// authError is a failed authentication with the detail Azure puts in
// AuthenticationErrorDetail: it tells a developer which string was signed.
type authError struct{ detail string }

func (e *authError) Error() string { return "authentication failed: " + e.detail }
func (e *authError) Unwrap() error { return errAuthFailed }

func authFailed(format string, args ...any) error {
	return &authError{detail: fmt.Sprintf(format, args...)}
}

// authenticate checks the Shared Key or Shared Key Lite signature of r.
// The canonicalized resource is built from the raw request path, exactly
// as the client sent it, because that is what each SDK signs.
func (s *Server) authenticate(r *http.Request, t *target, acct *Account, query url.Values) error {
	h := r.Header.Get("Authorization")
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
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return authFailed("The signature is not valid base64.")
	}
	date := r.Header.Get("x-ms-date")
	if date == "" {
		date = r.Header.Get("Date")
	}
	if date == "" {
		return authFailed("Request date header not specified.")
	}
	when, err := http.ParseTime(date)
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
	var tried []string
	for _, resource := range canonicalResources(t, query) {
		var toSign string
		if lite {
			toSign = date + "\n" + resource
		} else {
			toSign = r.Method + "\n" + r.Header.Get("Content-MD5") + "\n" + r.Header.Get("Content-Type") + "\n" + date + "\n" + resource
		}
		if acct.signedBy(toSign, got) {
			return nil
		}
		tried = append(tried, toSign)
	}
	return authFailed("The MAC signature found in the HTTP request '%s' is not the same as any computed signature. Server used following string to sign: '%s'.", sig, tried[0])
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
