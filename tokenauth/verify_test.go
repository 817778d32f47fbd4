package tokenauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtables/pgtables/internal/testissuer"
	"github.com/pgtables/pgtables/tokenauth"
)

func newVerifier(t *testing.T, iss *testissuer.Issuer, mod func(*tokenauth.Config)) *tokenauth.Verifier {
	t.Helper()
	cfg := tokenauth.Config{Issuers: []string{iss.URL}, HTTPClient: iss.Client(), MinRefreshInterval: time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	v, err := tokenauth.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifyAcceptsValidTokens(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	ec := iss.NewKey(t, "ES256")
	iss.Publish(ec)
	v := newVerifier(t, iss, nil)
	rsToken := iss.Token(t, iss.StandardClaims("alice", "Storage Table Data Reader"))
	iss.SignWith(ec)
	esToken := iss.Token(t, iss.StandardClaims("bob"))
	trailing := iss.StandardClaims("carol")
	trailing["aud"] = []any{"api://other", "https://storage.azure.com/"}
	arrayAud := iss.Token(t, trailing)
	for _, tc := range []struct{ name, token, sub string }{
		{"RS256", rsToken, "alice"},
		{"ES256", esToken, "bob"},
		{"audience array with the trailing-slash form", arrayAud, "carol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), tc.token)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if id.Subject != tc.sub || id.Issuer != iss.URL {
				t.Fatalf("got %q of %q, want %q of %q", id.Subject, id.Issuer, tc.sub, iss.URL)
			}
		})
	}
}

func TestVerifyRefusesBadTokens(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	other := testissuer.New(t) // a real issuer, but not a trusted one
	v := newVerifier(t, iss, func(c *tokenauth.Config) { c.MaxTokenBytes = 4096 })
	key := iss.SigningKey()
	with := func(mod func(testissuer.Claims)) testissuer.Claims {
		c := iss.StandardClaims("mallory", "Storage Table Data Contributor")
		mod(c)
		return c
	}
	now := time.Now()
	valid := iss.Token(t, iss.StandardClaims("mallory"))
	stranger := iss.NewKey(t, "RS256") // never published
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"expired", iss.Token(t, with(func(c testissuer.Claims) { c["exp"] = now.Add(-10 * time.Minute).Unix() })), tokenauth.ErrExpired},
		{"without exp", iss.Token(t, with(func(c testissuer.Claims) { delete(c, "exp") })), tokenauth.ErrExpired},
		{"not yet valid", iss.Token(t, with(func(c testissuer.Claims) { c["nbf"] = now.Add(10 * time.Minute).Unix() })), tokenauth.ErrNotYetValid},
		{"wrong audience", iss.Token(t, with(func(c testissuer.Claims) { c["aud"] = "https://management.azure.com" })), tokenauth.ErrAudience},
		{"no audience", iss.Token(t, with(func(c testissuer.Claims) { delete(c, "aud") })), tokenauth.ErrAudience},
		{"wrong issuer", iss.Token(t, with(func(c testissuer.Claims) { c["iss"] = other.URL })), tokenauth.ErrIssuer},
		{"untrusted issuer's own token", other.Token(t, other.StandardClaims("mallory")), tokenauth.ErrIssuer},
		{"bad signature", testissuer.Tamper(t, valid, with(func(c testissuer.Claims) { c["sub"] = "admin" })), tokenauth.ErrSignature},
		{"alg none", testissuer.Unsigned(t, with(func(testissuer.Claims) {})), tokenauth.ErrAlgorithm},
		{"HMAC with the issuer's public key", testissuer.HMACWithPublicKey(t, key, with(func(testissuer.Claims) {})), tokenauth.ErrAlgorithm},
		{"unknown kid", testissuer.Sign(t, stranger, map[string]any{"alg": "RS256", "kid": stranger.ID}, with(func(testissuer.Claims) {})), tokenauth.ErrUnknownKey},
		{"known kid, other key", testissuer.Sign(t, stranger, map[string]any{"alg": "RS256", "kid": key.ID}, with(func(testissuer.Claims) {})), tokenauth.ErrSignature},
		{"ES256 header on an RSA key", testissuer.Sign(t, key, map[string]any{"alg": "ES256", "kid": key.ID}, with(func(testissuer.Claims) {})), tokenauth.ErrUnknownKey},
		{"oversize", iss.Token(t, with(func(c testissuer.Claims) { c["pad"] = strings.Repeat("x", 5000) })), tokenauth.ErrTooLarge},
		{"jku names other keys", testissuer.Sign(t, stranger, map[string]any{"alg": "RS256", "kid": stranger.ID, "jku": other.URL + "/keys"}, with(func(testissuer.Claims) {})), tokenauth.ErrUnknownKey},
		{"critical extension", testissuer.Sign(t, key, map[string]any{"alg": "RS256", "kid": key.ID, "crit": []string{"exp"}}, with(func(testissuer.Claims) {})), tokenauth.ErrMalformed},
		{"two parts", "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0", tokenauth.ErrMalformed},
		{"not base64", "%%%.%%%.%%%", tokenauth.ErrMalformed},
		{"empty", "", tokenauth.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), tc.token)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, %v; want %v", id, err, tc.want)
			}
		})
	}
}

// TestVerifyIgnoresKeysItMayNotUse: a JWKS may hold keys for other
// purposes; a symmetric key, a key for encryption and a key for another
// algorithm never verify a token, whatever its header says.
func TestVerifyIgnoresKeysItMayNotUse(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	v := newVerifier(t, iss, nil)
	claims := iss.StandardClaims("mallory")
	secret := iss.NewKey(t, "RS256")
	iss.PublishRaw(map[string]any{"kty": "oct", "kid": secret.ID, "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"})
	enc := iss.NewKey(t, "RS256")
	encJWK := enc.PublicJWK()
	encJWK.Use = "enc"
	iss.PublishRaw(encJWK)
	es := iss.NewKey(t, "ES256")
	esJWK := es.PublicJWK()
	esJWK.Algorithm = "ES384"
	iss.PublishRaw(esJWK)
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"RS256 naming a symmetric key", testissuer.Sign(t, secret, map[string]any{"alg": "RS256", "kid": secret.ID}, claims), tokenauth.ErrUnknownKey},
		{"HS256 naming a symmetric key", testissuer.HMACWithPublicKey(t, secret, claims), tokenauth.ErrAlgorithm},
		{"a key for encryption", testissuer.Sign(t, enc, map[string]any{"alg": "RS256", "kid": enc.ID}, claims), tokenauth.ErrUnknownKey},
		{"a key for another algorithm", testissuer.Sign(t, es, map[string]any{"alg": "ES256", "kid": es.ID}, claims), tokenauth.ErrUnknownKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(context.Background(), tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := v.Verify(context.Background(), iss.Token(t, claims)); err != nil {
		t.Fatalf("the issuer's signing key beside them: %v", err)
	}
}

// TestVerifyLeeway: exp and nbf count with the configured leeway.
func TestVerifyLeeway(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	now := time.Now()
	v := newVerifier(t, iss, func(c *tokenauth.Config) {
		c.Leeway = 2 * time.Minute
		c.Now = func() time.Time { return now }
	})
	for _, tc := range []struct {
		name     string
		exp, nbf time.Duration
		want     error
	}{
		{"expired within the leeway", -time.Minute, -time.Hour, nil},
		{"expired beyond the leeway", -3 * time.Minute, -time.Hour, tokenauth.ErrExpired},
		{"valid soon, within the leeway", time.Hour, time.Minute, nil},
		{"valid later, beyond the leeway", time.Hour, 3 * time.Minute, tokenauth.ErrNotYetValid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := iss.StandardClaims("x")
			c["exp"], c["nbf"] = now.Add(tc.exp).Unix(), now.Add(tc.nbf).Unix()
			if _, err := v.Verify(context.Background(), iss.Token(t, c)); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestVerifyKeyRotation: a token signed with a key the issuer has just
// published makes the verifier fetch the JWKS once, however many requests
// bring it at the same time; a retired key stops working once the keys
// are fetched again.
func TestVerifyKeyRotation(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	slow := newVerifier(t, iss, func(c *tokenauth.Config) { c.MinRefreshInterval = time.Hour })
	v := newVerifier(t, iss, nil)
	old := iss.SigningKey()
	for _, v := range []*tokenauth.Verifier{slow, v} {
		if _, err := v.Verify(context.Background(), iss.Token(t, iss.StandardClaims("a"))); err != nil {
			t.Fatal(err)
		}
	}
	next := iss.NewKey(t, "ES256")
	iss.Publish(next)
	iss.SignWith(next)
	token := iss.Token(t, iss.StandardClaims("a"))
	// The last fetch was just now and the minimum interval is an hour:
	// the request must wait, so give it a deadline and expect
	// ErrUnavailable rather than a refusal of a valid token.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := slow.Verify(ctx, token); !errors.Is(err, tokenauth.ErrUnavailable) {
		t.Fatalf("within the minimum refresh interval: got %v, want ErrUnavailable", err)
	}

	before := iss.JWKSFetches()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := v.Verify(context.Background(), token)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a valid token signed with the new key: %v", err)
		}
	}
	if n := iss.JWKSFetches() - before; n != 1 {
		t.Errorf("the new kid caused %d fetches of the JWKS, want 1", n)
	}
	iss.Retire(old)
	stale := testissuer.Sign(t, old, map[string]any{"alg": "RS256", "kid": old.ID}, iss.StandardClaims("a"))
	if _, err := v.Verify(context.Background(), stale); err != nil {
		t.Fatalf("the retired key before the keys are fetched again: %v", err)
	}
	v2 := newVerifier(t, iss, nil)
	if _, err := v2.Verify(context.Background(), stale); !errors.Is(err, tokenauth.ErrUnknownKey) {
		t.Fatalf("the retired key after a fetch: got %v, want ErrUnknownKey", err)
	}
}

// TestVerifyIssuerUnreachable: without keys, a token cannot be judged; the
// verifier says so (ErrUnavailable) within the fetch timeout.
func TestVerifyIssuerUnreachable(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	token := iss.Token(t, iss.StandardClaims("a"))
	v, err := tokenauth.NewVerifier(tokenauth.Config{Issuers: []string{iss.URL}, FetchTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The default client does not trust the test issuer's certificate.
	if _, err := v.Verify(context.Background(), token); !errors.Is(err, tokenauth.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}

// TestVerifyIssuerHangs: an issuer that never answers costs a request the
// fetch timeout, not more, and the answer is ErrUnavailable.
func TestVerifyIssuerHangs(t *testing.T) {
	t.Parallel()
	hang := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	iss := testissuer.New(t)
	claims := iss.StandardClaims("a")
	claims["iss"] = hang.URL
	v, err := tokenauth.NewVerifier(tokenauth.Config{Issuers: []string{hang.URL}, HTTPClient: hang.Client(), FetchTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), iss.Token(t, claims)); !errors.Is(err, tokenauth.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
}

func TestNewVerifierRefusesBadIssuers(t *testing.T) {
	t.Parallel()
	for _, issuers := range [][]string{nil, {"http://idp.example.com"}, {"https://"}, {"https://a.example.com?x=1"}, {"https://a.example.com", "https://a.example.com"}} {
		if _, err := tokenauth.NewVerifier(tokenauth.Config{Issuers: issuers}); err == nil {
			t.Errorf("issuers %q: accepted", issuers)
		}
	}
}

// FuzzVerify: whatever arrives as a token, Verify answers with an error or
// an identity, never a panic.
func FuzzVerify(f *testing.F) {
	iss := testissuer.New(f)
	v, err := tokenauth.NewVerifier(tokenauth.Config{Issuers: []string{iss.URL}, HTTPClient: iss.Client()})
	if err != nil {
		f.Fatal(err)
	}
	good := iss.Token(f, iss.StandardClaims("fuzz"))
	f.Add(good)
	f.Add(testissuer.Unsigned(f, iss.StandardClaims("fuzz")))
	f.Add(testissuer.HMACWithPublicKey(f, iss.SigningKey(), iss.StandardClaims("fuzz")))
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJSUzI1NiJ9.e30.")
	f.Fuzz(func(t *testing.T, token string) {
		id, err := v.Verify(context.Background(), token)
		if err == nil && id == nil {
			t.Fatal("no identity and no error")
		}
	})
}

// TestVerifyRefreshesOldKeysInTheBackground: keys older than the refresh
// interval still verify while new ones are fetched; once fetched, a key
// the issuer retired no longer does.
func TestVerifyRefreshesOldKeysInTheBackground(t *testing.T) {
	t.Parallel()
	iss := testissuer.New(t)
	v := newVerifier(t, iss, func(c *tokenauth.Config) { c.RefreshInterval = time.Nanosecond })
	token := iss.Token(t, iss.StandardClaims("a"))
	if _, err := v.Verify(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	next := iss.NewKey(t, "RS256")
	iss.Publish(next)
	iss.Retire(iss.SigningKey())
	iss.SignWith(next)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := v.Verify(context.Background(), token)
		if errors.Is(err, tokenauth.ErrUnknownKey) {
			break
		}
		if err != nil {
			t.Fatalf("before the background fetch: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the retired key still verifies: the keys were not fetched again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := v.Verify(context.Background(), iss.Token(t, iss.StandardClaims("a"))); err != nil {
		t.Fatalf("the new key: %v", err)
	}
}
