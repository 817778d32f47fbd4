package httpapi

import (
	"net/http"
	"net/netip"
)

// clientOrigin returns the address of the client that sent r and whether
// it reached the service over HTTPS: what a shared access signature's sip
// and spr are checked against, and what {svc} URLs and access logs use.
// Behind a trusted proxy (Config.TrustedProxies) both come from its
// X-Forwarded-For and X-Forwarded-Proto headers, resolved once per request
// by the middleware (proxy.go); otherwise from the connection. ok is false
// when the address cannot be told, which fails any sip check.
func clientOrigin(r *http.Request) (ip netip.Addr, https, ok bool) {
	o := requestOrigin(r)
	return o.ip, o.https, o.ip.IsValid()
}
