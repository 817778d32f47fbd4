package httpapi

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// resource is what a request addresses, after the account.
type resource uint8

const (
	resService   resource = iota + 1 // "/" : service properties and stats
	resTables                        // /Tables, /Tables()
	resTable                         // /Tables('name')
	resBatch                         // /$batch
	resEntitySet                     // /name, /name(): insert, query, ACL
	resEntity                        // /name(PartitionKey='..',RowKey='..')
)

// target is a routed request-target.
type target struct {
	account   string // primary account name
	secondary bool   // addressed as <account>-secondary
	pathStyle bool   // account in the path rather than the host
	rawPath   string // the path exactly as sent (still percent-encoded), for signatures
	rawQuery  string
	kind      resource
	table     string // resTable, resEntitySet, resEntity
	pk, rk    string // resEntity
}

var errInvalidURI = errors.New("invalid uri")

// splitRequestTarget separates the raw, still-encoded path and query of a
// request-target. Routing and signatures must use the raw path: a key may
// contain '/' that only its %2F encoding keeps from splitting the path.
func splitRequestTarget(requestURI string) (rawPath, rawQuery string) {
	rest := requestURI
	if i := strings.Index(rest, "://"); i >= 0 && !strings.HasPrefix(rest, "/") {
		// absolute-form: drop scheme and authority
		rest = rest[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			rest = rest[j:]
		} else if j := strings.IndexByte(rest, '?'); j >= 0 {
			rest = rest[j:]
		} else {
			rest = ""
		}
	}
	rawPath, rawQuery, _ = strings.Cut(rest, "?")
	return rawPath, rawQuery
}

// hostAccount returns the account a host-style request names, if the Host
// qualifies: not an IP literal, at least one dot, and a first label that
// is a known account (with an optional -secondary suffix), under one of the
// configured service domains when any are configured.
func hostAccount(host string, known func(string) bool, domains []string) (account string, secondary, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if net.ParseIP(strings.Trim(host, "[]")) != nil {
		return "", false, false
	}
	label, domain, found := strings.Cut(host, ".")
	if !found || label == "" {
		return "", false, false
	}
	if len(domains) > 0 {
		match := false
		for _, d := range domains {
			if strings.EqualFold(domain, d) {
				match = true
				break
			}
		}
		if !match {
			return "", false, false
		}
	}
	name, secondary := strings.CutSuffix(label, "-secondary")
	if !known(name) {
		return "", false, false
	}
	return name, secondary, true
}

// route parses a request-target into a target. Host-style requests carry
// the account in the Host; otherwise it is the first path segment. Key
// predicates are strict OData literals.
func route(host, requestURI string, known func(string) bool, domains []string) (*target, error) {
	return routeKeys(host, requestURI, known, domains, false)
}

// routeKeys is route, reading key predicates leniently when asked: for the
// batches of the Go SDK, which writes quotes in keys without doubling them
// (parseKeyPredicate).
func routeKeys(host, requestURI string, known func(string) bool, domains []string, lenientKeys bool) (*target, error) {
	rawPath, rawQuery := splitRequestTarget(requestURI)
	t := &target{rawPath: rawPath, rawQuery: rawQuery}
	if !strings.HasPrefix(rawPath, "/") {
		return nil, errInvalidURI
	}
	rest := rawPath
	if acct, sec, ok := hostAccount(host, known, domains); ok {
		t.account, t.secondary = acct, sec
	} else {
		seg, after, _ := strings.Cut(rawPath[1:], "/")
		name, err := url.PathUnescape(seg)
		if err != nil || name == "" {
			return nil, errInvalidURI
		}
		t.account, t.secondary = strings.CutSuffix(name, "-secondary")
		t.pathStyle = true
		rest = "/" + after
		if !strings.Contains(rawPath[1:], "/") {
			rest = ""
		}
		if t.secondary && rest == "/"+t.account+"/" {
			// The Python SDK makes its secondary URL by putting
			// <account>-secondary where the primary endpoint's path has
			// <account>, and keeps the path: the service root of a
			// path-style endpoint becomes /<account>-secondary/<account>/.
			rest = "/"
		}
	}
	if err := t.parseResource(rest, lenientKeys); err != nil {
		return nil, err
	}
	return t, nil
}

// parseResource parses the resource path after the account: "" or "/",
// or one segment naming Tables, $batch, a table or an entity.
func (t *target) parseResource(rest string, lenientKeys bool) error {
	if rest == "" || rest == "/" {
		t.kind = resService
		return nil
	}
	seg := rest[1:]
	if strings.IndexByte(seg, '/') >= 0 {
		return errInvalidURI
	}
	name, pred, hasPred := strings.Cut(seg, "(")
	name, err := url.PathUnescape(name)
	if err != nil || name == "" {
		return errInvalidURI
	}
	if hasPred {
		if !strings.HasSuffix(pred, ")") {
			return errInvalidURI
		}
		pred = pred[:len(pred)-1]
	}
	switch {
	case name == "$batch" && !hasPred:
		t.kind = resBatch
	case name == "Tables" && (!hasPred || pred == ""):
		t.kind = resTables
	case name == "Tables":
		lit, err := unescapePredicate(pred)
		if err != nil {
			return err
		}
		tn, ok := parseStringLiteral(strings.TrimSpace(lit))
		if !ok {
			return errInvalidURI
		}
		t.kind, t.table = resTable, tn
	case !hasPred || pred == "":
		t.kind, t.table = resEntitySet, name
	default:
		lit, err := unescapePredicate(pred)
		if err != nil {
			return err
		}
		pk, rk, err := parseKeyPredicate(lit, lenientKeys)
		if err != nil {
			return err
		}
		t.kind, t.table, t.pk, t.rk = resEntity, name, pk, rk
	}
	return nil
}

// unescapePredicate percent-decodes a key predicate once. '+' stays a plus:
// only query strings use it for a space.
func unescapePredicate(s string) (string, error) {
	v, err := url.PathUnescape(s)
	if err != nil {
		return "", errInvalidURI
	}
	return v, nil
}

// parseKeyPredicate reads PartitionKey='..',RowKey='..' (decoded), where a
// quote inside a value is doubled; anything else, such as an undoubled
// quote or a third key, is an invalid URI. Go's aztables sends batch
// sub-request URLs without doubling: for them (lenient), when the strict
// reading fails, the values are taken verbatim between the first
// PartitionKey=' and the last ',RowKey=' and the final quote.
func parseKeyPredicate(s string, lenient bool) (pk, rk string, err error) {
	if pk, rk, ok := scanKeyPredicate(s); ok {
		return pk, rk, nil
	}
	if !lenient {
		return "", "", errInvalidURI
	}
	const pkOpen, rkOpen = "PartitionKey='", "',RowKey='"
	i := strings.Index(s, pkOpen)
	j := strings.LastIndex(s, rkOpen)
	if i != 0 || j < len(pkOpen) || !strings.HasSuffix(s, "'") || len(s) < j+len(rkOpen)+1 {
		return "", "", errInvalidURI
	}
	return s[len(pkOpen):j], s[j+len(rkOpen) : len(s)-1], nil
}

func scanKeyPredicate(s string) (pk, rk string, ok bool) {
	p := predScanner{s: s}
	p.space()
	if !p.word("PartitionKey") {
		return "", "", false
	}
	p.space()
	if !p.char('=') {
		return "", "", false
	}
	p.space()
	if pk, ok = p.literal(); !ok {
		return "", "", false
	}
	p.space()
	if !p.char(',') {
		return "", "", false
	}
	p.space()
	if !p.word("RowKey") {
		return "", "", false
	}
	p.space()
	if !p.char('=') {
		return "", "", false
	}
	p.space()
	if rk, ok = p.literal(); !ok {
		return "", "", false
	}
	p.space()
	return pk, rk, p.i == len(p.s)
}

// parseStringLiteral reads a whole OData string literal in single quotes,
// a quote inside it doubled.
func parseStringLiteral(s string) (string, bool) {
	p := predScanner{s: s}
	v, ok := p.literal()
	return v, ok && p.i == len(s)
}

type predScanner struct {
	s string
	i int
}

func (p *predScanner) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *predScanner) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *predScanner) char(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *predScanner) literal() (string, bool) {
	if !p.char('\'') {
		return "", false
	}
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		if c != '\'' {
			b.WriteByte(c)
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '\'' {
			b.WriteByte('\'')
			p.i++
			continue
		}
		return b.String(), true
	}
	return "", false
}
