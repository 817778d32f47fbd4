package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies parses a comma-separated list of CIDR prefixes or
// single addresses ("10.0.0.0/8, 192.168.1.7, fd00::/8") naming the proxies
// whose X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host headers are
// believed. An empty list trusts nobody.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %w", f, err)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", f, err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// origin is where a request came from, as far as the service can tell:
// the connection itself, or what trusted proxies in front of it say.
type origin struct {
	ip    netip.Addr // the client; invalid when it cannot be told
	https bool       // the client used HTTPS
	host  string     // the Host the client addressed, when a trusted proxy forwarded one
}

// originKey keys the request's reqState in its context.
type originKey struct{}

// reqState is what the middleware learns about a request before and after
// the handler: where it came from, and what the handler found it asks for
// (for metrics and the access log), so that a request is routed once.
type reqState struct {
	origin             origin
	op, account, table string
	auth, subject      string // the authentication scheme, and a token's subject
}

// withOrigin returns r with ctx (r's context or one made from it) as its
// context, carrying the request's state with its origin resolved against
// the trusted proxies (for clientOrigin), and, when a trusted proxy
// forwarded the host the client addressed, that host as r.Host (for
// routing host-style accounts and for {svc} URLs).
func withOrigin(ctx context.Context, r *http.Request, trusted []netip.Prefix) (*http.Request, *reqState) {
	st := &reqState{origin: resolveOrigin(r, trusted), op: labelUnknown}
	r = r.WithContext(context.WithValue(ctx, originKey{}, st))
	if st.origin.host != "" {
		r.Host = st.origin.host
	}
	return r, st
}

// resolveOrigin works out who sent r. Forwarding headers count only when
// the connection comes from a trusted proxy. X-Forwarded-For is read from
// the right: each address a trusted proxy added is skipped, and the first
// untrusted one is the client (if all are trusted, the leftmost).
// X-Forwarded-Proto and X-Forwarded-Host are taken from their last value,
// the one the proxy next to us set.
func resolveOrigin(r *http.Request, trusted []netip.Prefix) origin {
	o := origin{ip: remoteIP(r.RemoteAddr), https: r.TLS != nil}
	if !o.ip.IsValid() || !trustedAddr(o.ip, trusted) {
		return o
	}
	if hops := headerList(r.Header, "X-Forwarded-For"); len(hops) > 0 {
		for i := len(hops) - 1; i >= 0; i-- {
			ip := parseHop(hops[i])
			o.ip = ip
			if !ip.IsValid() || !trustedAddr(ip, trusted) {
				break
			}
		}
	}
	if p := headerList(r.Header, "X-Forwarded-Proto"); len(p) > 0 {
		o.https = strings.EqualFold(p[len(p)-1], "https")
	}
	if h := headerList(r.Header, "X-Forwarded-Host"); len(h) > 0 && validHost(h[len(h)-1]) {
		o.host = h[len(h)-1]
	}
	return o
}

// remoteIP is the address of the connection's peer, invalid when unknown.
func remoteIP(remoteAddr string) netip.Addr {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap().WithZone("")
}

// parseHop reads one X-Forwarded-For element: an address, possibly with a
// port or in brackets as some proxies write it.
func parseHop(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	ip, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap().WithZone("")
}

func trustedAddr(ip netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// headerList splits every value of a comma-separated header into its
// trimmed, non-empty elements, in order.
func headerList(h http.Header, name string) []string {
	var out []string
	for _, v := range h.Values(name) {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

// validHost accepts what may stand in a Host header: a name or address
// with an optional port, nothing that could break a URL built from it.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == '_', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// requestOrigin returns the origin withOrigin resolved for r, or the
// connection's own when r did not pass through it.
func requestOrigin(r *http.Request) origin {
	if st := stateOf(r); st != nil {
		return st.origin
	}
	return origin{ip: remoteIP(r.RemoteAddr), https: r.TLS != nil}
}

// stateOf returns the reqState withOrigin attached to r, or nil.
func stateOf(r *http.Request) *reqState {
	st, _ := r.Context().Value(originKey{}).(*reqState)
	return st
}
