package httpapi

import (
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// CORS (rest-protocol.md §3.17) from the account's service properties: a
// preflight OPTIONS is answered from the first rule that allows its origin,
// method and headers; an actual request with an Origin that a rule allows
// gets Access-Control-Allow-Origin and -Expose-Headers, on errors too. The
// rules are read from the database for every request with an Origin, so a
// change applies at once on every replica.

// preflight answers a CORS preflight request. It is not authenticated.
func (rq *request) preflight() error {
	r := rq.r()
	origin := headerValue(r.Header, "Origin")
	method := r.Header.Get("Access-Control-Request-Method")
	if origin == "" || method == "" {
		return odata.Detailf(errInvalidHeader, "A required CORS header is not present.")
	}
	if rq.srv.cfg.Accounts[rq.t.account] == nil {
		return errCorsPreflight
	}
	rules, err := rq.srv.store.CorsRules(r.Context(), rq.t.account)
	if err != nil {
		return err
	}
	requested := strings.Join(r.Header.Values("Access-Control-Request-Headers"), ",")
	rule := matchCorsRule(rules, origin, method, splitList(requested), true)
	if rule == nil {
		return errCorsPreflight
	}
	h := rq.header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", method)
	if len(splitList(requested)) > 0 {
		h.Set("Access-Control-Allow-Headers", requested)
	}
	h.Set("Access-Control-Max-Age", strconv.Itoa(rule.MaxAgeInSeconds))
	h.Set("Access-Control-Allow-Credentials", "true")
	addVaryOrigin(h)
	return rq.writeNoContent(http.StatusOK)
}

// corsHeaders adds the CORS headers of an actual (not preflight) request
// that carries an Origin, before the request is authenticated, so that a
// browser can read error answers too. Failing to read the rules only
// costs the headers.
func (rq *request) corsHeaders() {
	r := rq.r()
	origin := headerValue(r.Header, "Origin")
	if origin == "" {
		return
	}
	rules, err := rq.srv.store.CorsRules(r.Context(), rq.t.account)
	if err != nil {
		rq.srv.log.Warn("read cors rules", "request_id", rq.id, "err", err)
		return
	}
	if len(rules) == 0 {
		return
	}
	h := rq.header()
	rule := matchCorsRule(rules, origin, r.Method, nil, false)
	if rule == nil {
		addVaryOrigin(h)
		return
	}
	if rule.AllowedOrigins == "*" {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		addVaryOrigin(h)
	}
	if exposed := splitList(rule.ExposedHeaders); len(exposed) > 0 {
		// Which headers a wildcard exposes depends on the answer: decide
		// when it is written.
		rq.c.Response().Before(func() {
			h.Set("Access-Control-Expose-Headers", exposeHeaders(h, exposed))
		})
	}
}

// matchCorsRule returns the first rule that allows origin and method and,
// for a preflight, each requested header.
func matchCorsRule(rules []store.CorsRule, origin, method string, headers []string, preflight bool) *store.CorsRule {
	for i := range rules {
		r := &rules[i]
		if !listHas(splitList(r.AllowedOrigins), origin, false) || !listHas(splitList(r.AllowedMethods), method, false) {
			continue
		}
		if preflight {
			allowed := splitList(r.AllowedHeaders)
			ok := true
			for _, h := range headers {
				ok = ok && listHas(allowed, h, true)
			}
			if !ok {
				continue
			}
		}
		return r
	}
	return nil
}

// listHas reports whether a rule's list admits v: an entry equal to it
// (case-insensitively), "*", or with prefixes, an entry "prefix*".
func listHas(list []string, v string, prefixes bool) bool {
	for _, e := range list {
		switch {
		case e == "*", strings.EqualFold(e, v):
			return true
		case prefixes && strings.HasSuffix(e, "*") && len(v) >= len(e)-1 && strings.EqualFold(v[:len(e)-1], e[:len(e)-1]):
			return true
		}
	}
	return false
}

// exposeHeaders lists the response headers a rule's ExposedHeaders expose:
// those of h that an entry matches (entries may be "prefix*" or "*"), and
// every literal entry.
func exposeHeaders(h http.Header, exposed []string) string {
	seen := map[string]bool{}
	var names []string
	for name := range h {
		l := strings.ToLower(name)
		if strings.HasPrefix(l, "access-control-") || l == "vary" {
			continue
		}
		if listHas(exposed, name, true) && !seen[l] {
			seen[l] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, e := range exposed {
		if !strings.HasSuffix(e, "*") && !seen[strings.ToLower(e)] {
			seen[strings.ToLower(e)] = true
			names = append(names, e)
		}
	}
	return strings.Join(names, ",")
}

// addVaryOrigin adds Origin to Vary once.
func addVaryOrigin(h http.Header) {
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "Origin") {
				return
			}
		}
	}
	h.Add("Vary", "Origin")
}
