// Package testissuer is an OpenID Connect issuer for tests: its own keys,
// a discovery document and a JWKS served over TLS on loopback, and tokens
// signed to order, including the broken ones a resource server must
// refuse. Its issuer URL has the shape of a Microsoft Entra ID tenant's
// (https://host/<tenant id>/v2.0), so that the SDKs' tenant discovery
// from a 401 challenge works against it.
package testissuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TenantID is the issuer's tenant, a UUID as Entra ID's are.
const TenantID = "72f988bf-86f1-41af-91ab-2d7cd011db47"

// Audience is what the Azure SDKs' tokens carry.
const Audience = "https://storage.azure.com"

// Issuer is a running test issuer.
type Issuer struct {
	URL    string // the issuer identifier, as tokens name it in iss
	server *httptest.Server

	mu        sync.Mutex
	keys      []*Key // published in the JWKS
	raw       []any  // published in the JWKS as they are (PublishRaw)
	signing   *Key   // signs new tokens
	jwksFetch atomic.Int64
}

// Key is a signing key of the issuer.
type Key struct {
	ID  string
	Alg string // RS256 or ES256
	key crypto.Signer
}

// New starts an issuer with one RS256 key; it stops when t ends.
func New(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/"+TenantID+"/v2.0/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"issuer":                                iss.URL,
			"jwks_uri":                              iss.server.URL + "/" + TenantID + "/discovery/v2.0/keys",
			"authorization_endpoint":                iss.server.URL + "/" + TenantID + "/oauth2/v2.0/authorize",
			"token_endpoint":                        iss.server.URL + "/" + TenantID + "/oauth2/v2.0/token",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("/"+TenantID+"/discovery/v2.0/keys", func(w http.ResponseWriter, r *http.Request) {
		iss.jwksFetch.Add(1)
		iss.mu.Lock()
		keys := append([]any(nil), iss.raw...)
		for _, k := range iss.keys {
			keys = append(keys, k.PublicJWK())
		}
		iss.mu.Unlock()
		writeJSON(w, map[string]any{"keys": keys})
	})
	iss.server = httptest.NewUnstartedServer(mux)
	// Clients that do not trust the certificate are part of the tests.
	iss.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	iss.server.StartTLS()
	t.Cleanup(iss.server.Close)
	iss.URL = iss.server.URL + "/" + TenantID + "/v2.0"
	k := iss.NewKey(t, "RS256")
	iss.Publish(k)
	iss.SignWith(k)
	return iss
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(v)
}

// Client returns an HTTP client that trusts the issuer's certificate.
func (iss *Issuer) Client() *http.Client { return iss.server.Client() }

// CertPEM returns the issuer's TLS certificate in PEM.
func (iss *Issuer) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: iss.server.Certificate().Raw})
}

// JWKSFetches counts the fetches of the JWKS so far.
func (iss *Issuer) JWKSFetches() int64 { return iss.jwksFetch.Load() }

// NewKey makes a key for alg (RS256 or ES256), not yet published.
func (iss *Issuer) NewKey(t testing.TB, alg string) *Key {
	t.Helper()
	var signer crypto.Signer
	var err error
	switch alg {
	case "RS256":
		signer, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		signer, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		t.Fatalf("testissuer: algorithm %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Key{ID: hex.EncodeToString(id[:]), Alg: alg, key: signer}
}

// Publish adds k to the JWKS.
func (iss *Issuer) Publish(k *Key) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys = append(iss.keys, k)
}

// PublishRaw adds jwk, any JSON value, to the JWKS as it is: keys of
// other types and uses than a resource server may use.
func (iss *Issuer) PublishRaw(jwk any) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.raw = append(iss.raw, jwk)
}

// PublicJWK is k's public key as the JWKS publishes it.
func (k *Key) PublicJWK() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.key.Public(), KeyID: k.ID, Algorithm: k.Alg, Use: "sig"}
}

// Retire removes k from the JWKS.
func (iss *Issuer) Retire(k *Key) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	for n, p := range iss.keys {
		if p == k {
			iss.keys = append(iss.keys[:n], iss.keys[n+1:]...)
			return
		}
	}
}

// SignWith makes k sign the tokens Token makes from now on.
func (iss *Issuer) SignWith(k *Key) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.signing = k
}

// SigningKey returns the key that signs new tokens.
func (iss *Issuer) SigningKey() *Key {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.signing
}

// Claims are a token's claims.
type Claims map[string]any

// StandardClaims are valid claims for subject: this issuer, the storage
// audience, valid from a minute ago for an hour.
func (iss *Issuer) StandardClaims(subject string, roles ...string) Claims {
	now := time.Now()
	c := Claims{
		"iss": iss.URL,
		"aud": Audience,
		"sub": subject,
		"oid": subject,
		"tid": TenantID,
		"iat": now.Add(-time.Minute).Unix(),
		"nbf": now.Add(-time.Minute).Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	if len(roles) > 0 {
		c["roles"] = roles
	}
	return c
}

// Token signs claims with the current signing key.
func (iss *Issuer) Token(t testing.TB, claims Claims) string {
	t.Helper()
	k := iss.SigningKey()
	return Sign(t, k, map[string]any{"alg": k.Alg, "kid": k.ID, "typ": "JWT"}, claims)
}

// Sign makes a compact JWS of header and claims signed with k's algorithm
// (whatever header says).
func Sign(t testing.TB, k *Key, header map[string]any, claims Claims) string {
	t.Helper()
	input := encode(t, header) + "." + encode(t, claims)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	switch key := k.key.(type) {
	case *ecdsa.PrivateKey:
		// JWS wants r||s, each 32 bytes, not ASN.1.
		r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	default:
		var err error
		if sig, err = k.key.Sign(rand.Reader, digest[:], crypto.SHA256); err != nil {
			t.Fatal(err)
		}
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// Unsigned makes an "alg: none" token of claims.
func Unsigned(t testing.TB, claims Claims) string {
	t.Helper()
	return encode(t, map[string]any{"alg": "none", "typ": "JWT"}) + "." + encode(t, claims) + "."
}

// HMACWithPublicKey makes an HS256 token whose secret is k's public key in
// PEM: the classic confusion attack on verifiers that let the token choose
// the algorithm.
func HMACWithPublicKey(t testing.TB, k *Key, claims Claims) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.key.Public())
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	input := encode(t, map[string]any{"alg": "HS256", "kid": k.ID, "typ": "JWT"}) + "." + encode(t, claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Tamper returns token with its payload replaced by claims and its
// signature kept: a bad signature.
func Tamper(t testing.TB, token string, claims Claims) string {
	t.Helper()
	parts := strings.Split(token, ".")
	return parts[0] + "." + encode(t, claims) + "." + parts[2]
}

func encode(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
