package tokenauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// maxDocumentBytes bounds a discovery document or JWKS as read.
const maxDocumentBytes = 1 << 20

// maxKeys bounds the keys kept of one JWKS: every key tried costs a
// signature verification.
const maxKeys = 100

// issuer caches one trusted issuer's signing keys. Its keys come from the
// jwks_uri of its discovery document and nowhere else.
type issuer struct {
	url string
	cfg *Config

	// fetch is held by the one fetch at a time (refreshLocked).
	fetch sync.Mutex

	mu        sync.RWMutex
	keys      []jose.JSONWebKey
	fetched   time.Time // when keys were fetched
	attempted time.Time // the last fetch, successful or not
	lastErr   error     // of the last fetch, when it failed
	gen       uint64    // counts fetches, to tell whether one happened meanwhile
}

func newIssuer(u string, cfg *Config) *issuer { return &issuer{url: u, cfg: cfg} }

// keysFor returns the issuer's keys with the given kid (all keys when kid
// is empty). Keys older than the refresh interval are still used while a
// fetch of new ones runs in the background. A kid not among the keys (or
// no keys at all) makes the request fetch them, but never more often than
// the minimum refresh interval: such a request waits for the interval to
// pass rather than fail, so that a key the issuer has just started to sign
// with is learnt without refusing anyone, while made-up kids cost the
// issuer at most one fetch an interval.
func (i *issuer) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	i.mu.RLock()
	keys, gen, fetched := i.keys, i.gen, i.fetched
	i.mu.RUnlock()
	if found := match(keys, kid); len(found) > 0 {
		if i.cfg.Now().Sub(fetched) > i.cfg.RefreshInterval && i.fetch.TryLock() {
			// One refresh at a time; the fetch is bounded by the fetch
			// timeout and ends with it.
			go func() {
				defer i.fetch.Unlock()
				_ = i.refreshLocked(context.WithoutCancel(ctx), gen, false)
			}()
		}
		return found, nil
	}
	i.fetch.Lock()
	err := i.refreshLocked(ctx, gen, true)
	i.fetch.Unlock()
	if err != nil {
		return nil, err
	}
	i.mu.RLock()
	keys, lastErr := i.keys, i.lastErr
	i.mu.RUnlock()
	if found := match(keys, kid); len(found) > 0 {
		return found, nil
	}
	if len(keys) == 0 && lastErr != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, lastErr)
	}
	return nil, fmt.Errorf("%w: the issuer has no key with kid %q", ErrUnknownKey, kid)
}

// refreshLocked fetches the keys unless a fetch happened since the caller
// saw generation seen. When the last fetch was more recent than the
// minimum refresh interval it waits for the interval to end if wait is set
// (an unknown kid), else it does nothing. Keys fetched earlier stay in use
// when a fetch fails. It fails only when ctx ends while it waits. The
// caller holds i.fetch, which serialises fetches: requests that find a kid
// unknown at once (a rotation) wait for one fetch rather than each make
// their own.
func (i *issuer) refreshLocked(ctx context.Context, seen uint64, wait bool) error {
	i.mu.RLock()
	gen, attempted := i.gen, i.attempted
	i.mu.RUnlock()
	if gen != seen {
		return nil
	}
	if since := i.cfg.Now().Sub(attempted); !attempted.IsZero() && since < i.cfg.MinRefreshInterval {
		if !wait {
			return nil
		}
		t := time.NewTimer(i.cfg.MinRefreshInterval - since)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %v", ErrUnavailable, context.Cause(ctx))
		case <-t.C:
		}
	}
	// The fetch is the issuer's business, not the request's: a client
	// that gives up must not leave the next one without keys. It is
	// bounded by the fetch timeout instead.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), i.cfg.FetchTimeout)
	defer cancel()
	keys, err := i.fetchKeys(fctx)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.gen++
	i.attempted = i.cfg.Now()
	i.lastErr = err
	if err == nil {
		i.keys, i.fetched = keys, i.attempted
	}
	return nil
}

// match returns the keys with kid, or all of them when kid is empty.
func match(keys []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	if kid == "" {
		return keys
	}
	for _, k := range keys {
		if k.KeyID == kid {
			return []jose.JSONWebKey{k}
		}
	}
	return nil
}

// discovery is the part of an OpenID Provider's metadata used here.
type discovery struct {
	Issuer  string `json:"issuer"`
	JWKSURI string `json:"jwks_uri"`
}

// fetchKeys reads the discovery document, checks that it is the
// issuer's own (OpenID Connect Discovery §4.3), and reads its JWKS.
func (i *issuer) fetchKeys(ctx context.Context) ([]jose.JSONWebKey, error) {
	var d discovery
	if err := i.getJSON(ctx, discoveryURL(i.url), &d); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if d.Issuer != i.url {
		return nil, fmt.Errorf("discovery: the document names issuer %q", d.Issuer)
	}
	u, err := url.Parse(d.JWKSURI)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("discovery: jwks_uri %q is not an https URL", d.JWKSURI)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := i.getJSON(ctx, d.JWKSURI, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		// A key this service cannot use (another type, a symmetric
		// key, a broken one) is skipped, not fatal: issuers publish
		// keys for other purposes too.
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() || !k.IsPublic() {
			continue
		}
		if !fits(k, jose.RS256) && !fits(k, jose.ES256) {
			continue
		}
		keys = append(keys, k)
		if len(keys) == maxKeys {
			break
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("jwks: no usable RS256 or ES256 signing key")
	}
	return keys, nil
}

// discoveryURL is where issuer's discovery document is:
// <issuer>/.well-known/openid-configuration. Microsoft Entra ID's v1.0
// issuer (https://sts.windows.net/<tenant>/, the iss of the tokens the
// SDKs get for https://storage.azure.com) publishes its document, which
// names that issuer, under https://login.microsoftonline.com/<tenant>/.
func discoveryURL(issuer string) string {
	if rest, ok := strings.CutPrefix(issuer, "https://sts.windows.net/"); ok {
		if tenant, _, _ := strings.Cut(rest, "/"); tenant != "" {
			return "https://login.microsoftonline.com/" + tenant + "/.well-known/openid-configuration"
		}
	}
	return strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
}

// getJSON GETs a JSON document of bounded size.
func (i *issuer) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := i.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && mt != "application/jwk-set+json") {
			return fmt.Errorf("GET %s: content type %q is not JSON", u, ct)
		}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if len(b) > maxDocumentBytes {
		return fmt.Errorf("GET %s: larger than %d bytes", u, maxDocumentBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
