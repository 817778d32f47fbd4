// Package tokenauth verifies OAuth 2.0 bearer tokens (JWT access tokens)
// from OpenID Connect issuers the operator trusts, as a careful resource
// server does, and turns a verified token's claims into grants on
// accounts and tables.
//
// It knows nothing of HTTP requests or of the Table protocol: httpapi asks
// it whether a token is valid (Verifier.Verify) and what the identity may
// do (Mapper.Grants), and answers the client in Azure's terms.
//
// What is checked, and why each check is explicit here rather than left to
// a library's defaults:
//   - size: a token longer than Config.MaxTokenBytes is refused before any
//     parsing, so that a hostile header costs nothing;
//   - algorithm: only RS256 and ES256, named in the token's header and
//     matching the type of the issuer's key. "none" and every HMAC are
//     refused: an HMAC "signed" with an issuer's public key would otherwise
//     verify for anyone who can read the JWKS;
//   - issuer: the unverified iss claim only selects one of the configured
//     issuers by exact comparison; the keys always come from that issuer's
//     own discovery document, never from a URL or key the token names (jku,
//     x5u, jwk and x5c headers are ignored);
//   - key: by kid; an unknown kid makes the issuer's JWKS be fetched again
//     once (key rotation), rate-limited so that made-up kids cannot make us
//     hammer the issuer;
//   - signature, then the claims of the verified payload: iss, aud (one of
//     Config.Audiences), exp (required) and nbf with Config.Leeway.
package tokenauth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Reasons a token is refused. Verify wraps one of them with the detail.
var (
	// ErrMalformed: not a compact JWS with a JSON header and payload.
	ErrMalformed = errors.New("malformed token")
	// ErrTooLarge: longer than Config.MaxTokenBytes.
	ErrTooLarge = errors.New("token too large")
	// ErrAlgorithm: an algorithm other than RS256 or ES256 (none, HMAC).
	ErrAlgorithm = errors.New("signing algorithm not accepted")
	// ErrIssuer: the token's issuer is not a configured one.
	ErrIssuer = errors.New("issuer not trusted")
	// ErrUnknownKey: the issuer has no key with the token's kid, even
	// after fetching its keys again.
	ErrUnknownKey = errors.New("signing key unknown")
	// ErrSignature: the signature does not verify with the issuer's key.
	ErrSignature = errors.New("signature invalid")
	// ErrAudience: none of the token's audiences is accepted.
	ErrAudience = errors.New("audience not accepted")
	// ErrExpired: exp is past (beyond the leeway), or missing.
	ErrExpired = errors.New("token expired")
	// ErrNotYetValid: nbf is in the future (beyond the leeway).
	ErrNotYetValid = errors.New("token not yet valid")
	// ErrUnavailable: the issuer's keys could not be fetched and none are
	// known; the token may be fine, so the caller should say "retry".
	ErrUnavailable = errors.New("issuer keys unavailable")
)

// Defaults of Config's zero fields.
const (
	DefaultMaxTokenBytes   = 16 << 10
	DefaultLeeway          = time.Minute
	DefaultFetchTimeout    = 10 * time.Second
	DefaultRefreshInterval = time.Hour
	// DefaultMinRefreshInterval bounds how often an unknown kid may cause
	// a fetch of an issuer's keys (issuer.keysFor).
	DefaultMinRefreshInterval = 5 * time.Second
)

// DefaultAudiences are the audiences the Azure SDKs' tokens carry: they
// ask for the scope https://storage.azure.com/.default.
func DefaultAudiences() []string {
	return []string{"https://storage.azure.com", "https://storage.azure.com/"}
}

// Config configures a Verifier.
type Config struct {
	// Issuers are the trusted issuer URLs, exactly as tokens name them in
	// iss (https only). Each one's discovery document is at
	// <issuer>/.well-known/openid-configuration.
	Issuers []string
	// Audiences accepted in aud; empty: DefaultAudiences().
	Audiences []string
	// Leeway allowed on exp and nbf for clocks that differ a little.
	Leeway time.Duration
	// MaxTokenBytes bounds the length of a token.
	MaxTokenBytes int
	// FetchTimeout bounds one fetch of a discovery document or JWKS.
	FetchTimeout time.Duration
	// RefreshInterval is how long fetched keys are used before they are
	// fetched again (they stay in use if that fails).
	RefreshInterval time.Duration
	// MinRefreshInterval is the least time between two fetches of one
	// issuer's keys.
	MinRefreshInterval time.Duration
	// HTTPClient fetches discovery documents and keys; nil: a client of
	// its own that trusts RootCAs.
	HTTPClient *http.Client
	// RootCAs are the certificate authorities trusted when fetching, for
	// the client of its own; nil: the system's.
	RootCAs *x509.CertPool
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Identity is who a verified token speaks for.
type Identity struct {
	Issuer  string
	Subject string
	// Expires is the token's exp.
	Expires time.Time
	// Claims are the verified payload's claims; numbers are json.Number.
	Claims map[string]any
}

// Verifier verifies tokens of its configured issuers. It is safe for
// concurrent use.
type Verifier struct {
	cfg       Config
	audiences map[string]bool
	issuers   map[string]*issuer
	order     []string // issuers as configured
}

// NewVerifier checks cfg and returns a Verifier. It fetches nothing yet:
// an issuer's keys are fetched when its first token arrives.
func NewVerifier(cfg Config) (*Verifier, error) {
	if len(cfg.Issuers) == 0 {
		return nil, errors.New("no issuers")
	}
	if len(cfg.Audiences) == 0 {
		cfg.Audiences = DefaultAudiences()
	}
	if cfg.Leeway <= 0 {
		cfg.Leeway = DefaultLeeway
	}
	if cfg.MaxTokenBytes <= 0 {
		cfg.MaxTokenBytes = DefaultMaxTokenBytes
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.MinRefreshInterval <= 0 {
		cfg.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if cfg.HTTPClient == nil {
		// A client of our own: redirects are not followed, so that the
		// keys come from the issuer's own host.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cfg.RootCAs}
		cfg.HTTPClient = &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &Verifier{cfg: cfg, audiences: map[string]bool{}, issuers: map[string]*issuer{}}
	for _, a := range cfg.Audiences {
		v.audiences[a] = true
	}
	for _, iss := range cfg.Issuers {
		u, err := url.Parse(iss)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("issuer %q: want an https URL without query or fragment", iss)
		}
		if v.issuers[iss] != nil {
			return nil, fmt.Errorf("issuer %q: listed twice", iss)
		}
		v.issuers[iss] = newIssuer(iss, &v.cfg)
		v.order = append(v.order, iss)
	}
	return v, nil
}

// Issuers returns the configured issuers, in their order.
func (v *Verifier) Issuers() []string { return append([]string(nil), v.order...) }

// accepted are the only signing algorithms, each with the key it needs.
var accepted = []jose.SignatureAlgorithm{jose.RS256, jose.ES256}

// header is the part of a JWS header Verify looks at itself.
type header struct {
	Alg  string   `json:"alg"`
	Kid  string   `json:"kid"`
	Crit []string `json:"crit"`
}

// Verify checks raw, the token of an "Authorization: Bearer" header, and
// returns its identity. Every refusal wraps one of the Err values.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Identity, error) {
	if len(raw) > v.cfg.MaxTokenBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d are accepted", ErrTooLarge, len(raw), v.cfg.MaxTokenBytes)
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return nil, fmt.Errorf("%w: not three dot-separated parts", ErrMalformed)
	}
	var h header
	if err := decodePart(parts[0], &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	alg := jose.SignatureAlgorithm(h.Alg)
	if alg != jose.RS256 && alg != jose.ES256 {
		return nil, fmt.Errorf("%w: %q; RS256 or ES256 are", ErrAlgorithm, h.Alg)
	}
	if len(h.Crit) > 0 {
		// RFC 7515 §4.1.11: extensions we do not understand must fail.
		return nil, fmt.Errorf("%w: critical header extensions %q are not understood", ErrMalformed, h.Crit)
	}
	var unverified struct {
		Iss string `json:"iss"`
	}
	if err := decodePart(parts[1], &unverified); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	// The unverified iss only picks one of the configured issuers; the
	// signature must then verify with that issuer's own keys.
	iss := v.issuers[unverified.Iss]
	if iss == nil {
		return nil, fmt.Errorf("%w: %q", ErrIssuer, unverified.Iss)
	}
	jws, err := jose.ParseSignedCompact(raw, accepted)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	keys, err := iss.keysFor(ctx, h.Kid)
	if err != nil {
		return nil, err
	}
	var payload []byte
	tried := 0
	for _, k := range keys {
		if !fits(k, alg) {
			continue
		}
		tried++
		if payload, err = jws.Verify(k.Key); err == nil {
			break
		}
	}
	if tried == 0 {
		return nil, fmt.Errorf("%w: the issuer has no %s key with kid %q", ErrUnknownKey, alg, h.Kid)
	}
	if payload == nil {
		return nil, fmt.Errorf("%w", ErrSignature)
	}
	return v.checkClaims(payload, iss.url)
}

// checkClaims validates the claims of a verified payload.
func (v *Verifier) checkClaims(payload []byte, issuerURL string) (*Identity, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return nil, fmt.Errorf("%w: payload is not a JSON object", ErrMalformed)
	}
	if iss, _ := claims["iss"].(string); iss != issuerURL {
		return nil, fmt.Errorf("%w: %q", ErrIssuer, iss)
	}
	if !v.audienceOK(claims["aud"]) {
		return nil, fmt.Errorf("%w: %v", ErrAudience, claims["aud"])
	}
	now := v.cfg.Now()
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return nil, fmt.Errorf("%w: the token has no valid exp", ErrExpired)
	}
	if now.After(exp.Add(v.cfg.Leeway)) {
		return nil, fmt.Errorf("%w: at %s", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	if raw, present := claims["nbf"]; present {
		nbf, ok := numericDate(raw)
		if !ok {
			return nil, fmt.Errorf("%w: nbf is not a number", ErrMalformed)
		}
		if now.Add(v.cfg.Leeway).Before(nbf) {
			return nil, fmt.Errorf("%w: not before %s", ErrNotYetValid, nbf.UTC().Format(time.RFC3339))
		}
	}
	sub, _ := claims["sub"].(string)
	return &Identity{Issuer: issuerURL, Subject: sub, Expires: exp, Claims: claims}, nil
}

// audienceOK reports whether aud (a string or an array of strings, RFC
// 7519 §4.1.3) holds an accepted audience.
func (v *Verifier) audienceOK(aud any) bool {
	switch a := aud.(type) {
	case string:
		return v.audiences[a]
	case []any:
		for _, e := range a {
			if s, ok := e.(string); ok && v.audiences[s] {
				return true
			}
		}
	}
	return false
}

// numericDate reads a NumericDate claim: seconds since the epoch, possibly
// with a fraction.
func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// fits reports whether key k may verify a signature made with alg: the
// key type the algorithm needs, an RSA modulus of at least 2048 bits, the
// P-256 curve for ES256, and the key's own alg and use, if it states
// them, agreeing.
func fits(k jose.JSONWebKey, alg jose.SignatureAlgorithm) bool {
	if k.Algorithm != "" && k.Algorithm != string(alg) {
		return false
	}
	if k.Use != "" && k.Use != "sig" {
		return false
	}
	switch key := k.Key.(type) {
	case *rsa.PublicKey:
		return alg == jose.RS256 && key.N.BitLen() >= 2048
	case *ecdsa.PublicKey:
		return alg == jose.ES256 && key.Curve == elliptic.P256()
	}
	return false
}

// decodePart decodes one base64url part of a compact JWS as JSON.
func decodePart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return errors.New("not base64url")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errors.New("not a JSON object")
	}
	return nil
}
