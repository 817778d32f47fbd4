package httpapi

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// Shared access signatures (rest-protocol.md §8.5-§8.8). A request carries
// one when it has no Authorization header but a sig query parameter: an
// account SAS when it has ss or srt, otherwise a service (table) SAS. The
// signature is verified against every key of the account, then the SAS's
// time window, source IP and protocol; what the request may do is decided
// per operation by sasGrant.authorize before any handler runs, and again
// for every operation of a batch.

// sasStartSkew is how far a SAS's start time may lie in the future: clocks
// of the client that signed and of this server may differ a little.
const sasStartSkew = 5 * time.Minute

// sasParams are the query parameters a SAS is made of. Each may appear at
// most once: a repeated one could mean one thing to us and another to
// whoever signed it.
var sasParams = []string{"sv", "ss", "srt", "sp", "st", "se", "sip", "spr", "ses", "sig", "tn", "si", "spk", "srk", "epk", "erk"}

// sasValues are a SAS's parameters, decoded once and used exactly as given
// in the string to sign.
type sasValues struct {
	sv, ss, srt, sp, st, se, sip, spr, ses, sig string
	tn, si, spk, srk, epk, erk                  string
}

func readSASValues(q url.Values) (*sasValues, error) {
	for _, p := range sasParams {
		if len(q[p]) > 1 {
			return nil, authFailed("The signature parameter %s appears more than once.", p)
		}
	}
	return &sasValues{
		sv: q.Get("sv"), ss: q.Get("ss"), srt: q.Get("srt"), sp: q.Get("sp"), st: q.Get("st"), se: q.Get("se"),
		sip: q.Get("sip"), spr: q.Get("spr"), ses: q.Get("ses"), sig: q.Get("sig"),
		tn: q.Get("tn"), si: q.Get("si"), spk: q.Get("spk"), srk: q.Get("srk"), epk: q.Get("epk"), erk: q.Get("erk"),
	}, nil
}

// serviceSASStringToSign is the string a service SAS for table signs, in the
// layout of its signed version: twelve fields from 2015-04-05 (with sip and
// spr), ten before, and before 2015-02-21 a canonical resource without the
// /table prefix. An sv older than 2012-02-12 has no table SAS.
func serviceSASStringToSign(v *sasValues, account, table string) (string, bool) {
	switch {
	case v.sv >= "2015-04-05":
		return strings.Join([]string{v.sp, v.st, v.se, "/table/" + account + "/" + table, v.si, v.sip, v.spr, v.sv,
			v.spk, v.srk, v.epk, v.erk}, "\n"), true
	case v.sv >= "2015-02-21":
		return strings.Join([]string{v.sp, v.st, v.se, "/table/" + account + "/" + table, v.si, v.sv,
			v.spk, v.srk, v.epk, v.erk}, "\n"), true
	case v.sv >= "2012-02-12":
		return strings.Join([]string{v.sp, v.st, v.se, "/" + account + "/" + table, v.si, v.sv,
			v.spk, v.srk, v.epk, v.erk}, "\n"), true
	}
	return "", false
}

// accountSASStringToSign is the string an account SAS signs: every field
// followed by a line feed, with the encryption scope from 2020-12-06.
// Account SASes exist from 2015-04-05.
func accountSASStringToSign(v *sasValues, account string) (string, bool) {
	fields := []string{account, v.sp, v.ss, v.srt, v.st, v.se, v.sip, v.spr, v.sv}
	switch {
	case v.sv >= "2020-12-06":
		fields = append(fields, v.ses)
	case v.sv < "2015-04-05":
		return "", false
	}
	return strings.Join(fields, "\n") + "\n", true
}

// signatureMatches compares sig in constant time with the signature of each
// string to sign under each key of the account.
func signatureMatches(sig []byte, acct *Account, toSign []string) bool {
	ok := false
	for _, s := range toSign {
		if acct.signedBy([]byte(s), sig) {
			ok = true
		}
	}
	return ok
}

// sasKind tells a service SAS from an account SAS.
type sasKind uint8

const (
	serviceSAS sasKind = iota + 1
	accountSAS
)

// grant is what an authenticated request may do, as far as its credential
// limits it: a SAS (sasGrant) or a bearer token (tokenGrant). A request
// signed with an account key has none: the key may do anything.
type grant interface {
	// authorize checks that the grant allows op on table (the addressed
	// table for table and entity operations; "" for Create Table before
	// its body names the table).
	authorize(op authOp, table string) error
	// checkKeys checks that an entity's keys lie within the grant.
	checkKeys(pk, rk string) error
	// keyRange is the range of keys a query must keep to, if any.
	keyRange() (store.KeyRange, bool)
}

// sasGrant is what a verified SAS allows.
type sasGrant struct {
	kind  sasKind
	perms string // sp, or the stored policy's permission
	// service SAS
	table string         // tn
	keys  store.KeyRange // spk/srk .. epk/erk
	// account SAS
	resourceTypes string // srt
}

// authenticateSAS verifies the SAS of rq and returns what it grants.
func (s *Server) authenticateSAS(rq *request) (*sasGrant, error) {
	v, err := readSASValues(rq.query)
	if err != nil {
		return nil, err
	}
	if !validVersion(v.sv) {
		return nil, authFailed("The signed version (sv) '%s' is missing or not a date.", v.sv)
	}
	// A '+' that the client failed to encode arrives as a space.
	sig, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(v.sig, " ", "+"))
	if err != nil || len(sig) == 0 {
		return nil, authFailed("The signature (sig) is not valid base64.")
	}
	if rq.query.Has("ss") || rq.query.Has("srt") {
		return s.authenticateAccountSAS(rq, v, sig)
	}
	if v.tn == "" {
		return nil, authFailed("A service SAS must name its table (tn); an account SAS needs ss and srt.")
	}
	return s.authenticateServiceSAS(rq, v, sig)
}

func (s *Server) authenticateServiceSAS(rq *request, v *sasValues, sig []byte) (*sasGrant, error) {
	account := rq.acct.Name
	// JS, Python and Go sign the lower-cased table name, .NET the name as
	// given.
	tables := []string{strings.ToLower(v.tn)}
	if v.tn != tables[0] {
		tables = append(tables, v.tn)
	}
	var toSign []string
	for _, table := range tables {
		sts, ok := serviceSASStringToSign(v, account, table)
		if !ok {
			return nil, authFailed("The signed version (sv) '%s' does not support table SAS.", v.sv)
		}
		toSign = append(toSign, sts)
	}
	if !signatureMatches(sig, rq.acct, toSign) {
		return nil, authFailed("Signature did not match. String to sign used was '%s'.", toSign[0])
	}
	g := &sasGrant{kind: serviceSAS, table: v.tn, perms: v.sp}
	var start, expiry *int64
	var err error
	if start, err = parseSASTime("st", v.st); err != nil {
		return nil, err
	}
	if expiry, err = parseSASTime("se", v.se); err != nil {
		return nil, err
	}
	if v.si != "" {
		p, err := s.store.AccessPolicy(rq.r().Context(), account, v.tn, v.si)
		if errors.Is(err, store.ErrPolicyNotFound) {
			return nil, authFailed("The table '%s' has no stored access policy '%s'.", v.tn, v.si)
		}
		if err != nil {
			return nil, err
		}
		if err := fromPolicy("st", &start, p.Start); err != nil {
			return nil, err
		}
		if err := fromPolicy("se", &expiry, p.Expiry); err != nil {
			return nil, err
		}
		if p.Permission != nil {
			if g.perms != "" {
				return nil, odata.Detailf(errInvalidQueryParam, "The signed permissions (sp) are given both by the SAS and by the stored access policy '%s'.", v.si)
			}
			g.perms = *p.Permission
		}
	}
	if g.perms == "" {
		return nil, authFailed("The signature grants no permissions: sp is missing from the SAS and from any stored access policy.")
	}
	if strings.Trim(g.perms, "raud") != "" {
		return nil, authFailed("The signed permissions '%s' are not valid for a table; use letters from raud.", g.perms)
	}
	if err := s.checkSASWindow(rq, start, expiry, v); err != nil {
		return nil, err
	}
	if g.keys, err = sasKeyRange(v); err != nil {
		return nil, err
	}
	return g, nil
}

// fromPolicy takes a time field missing from the SAS from its stored
// access policy; Azure refuses a field given in both places.
func fromPolicy(name string, field **int64, policy *int64) error {
	if policy == nil {
		return nil
	}
	if *field != nil {
		return odata.Detailf(errInvalidQueryParam, "The field %s is given both by the SAS and by its stored access policy.", name)
	}
	*field = policy
	return nil
}

func (s *Server) authenticateAccountSAS(rq *request, v *sasValues, sig []byte) (*sasGrant, error) {
	toSign, ok := accountSASStringToSign(v, rq.acct.Name)
	if !ok {
		return nil, authFailed("The signed version (sv) '%s' does not support account SAS.", v.sv)
	}
	if !signatureMatches(sig, rq.acct, []string{toSign}) {
		return nil, authFailed("Signature did not match. String to sign used was '%s'.", toSign)
	}
	if !strings.Contains(v.ss, "t") {
		return nil, odata.Detailf(errServiceMismatch, "This request is not authorized to perform this operation using this service. The signed services (ss) '%s' do not include the Table service (t).", v.ss)
	}
	if v.srt == "" || strings.Trim(v.srt, "sco") != "" {
		return nil, authFailed("The signed resource types (srt) '%s' are not valid; use letters from sco.", v.srt)
	}
	if v.sp == "" {
		return nil, authFailed("The signature grants no permissions (sp).")
	}
	start, err := parseSASTime("st", v.st)
	if err != nil {
		return nil, err
	}
	expiry, err := parseSASTime("se", v.se)
	if err != nil {
		return nil, err
	}
	if err := s.checkSASWindow(rq, start, expiry, v); err != nil {
		return nil, err
	}
	return &sasGrant{kind: accountSAS, perms: v.sp, resourceTypes: v.srt}, nil
}

// parseSASTime reads st or se: ISO 8601 in UTC, to the day, minute, second
// or fraction. An empty value is absent.
func parseSASTime(name, s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	ticks, ok := odata.ParseDateTime(s)
	if !ok || !odata.ValidDateTime(ticks) {
		return nil, authFailed("The signed time %s '%s' is not a valid ISO 8601 UTC time.", name, s)
	}
	return &ticks, nil
}

// checkSASWindow checks the SAS's time window, source IP range and
// protocol against the request.
func (s *Server) checkSASWindow(rq *request, start, expiry *int64, v *sasValues) error {
	now := s.now().UTC()
	if expiry == nil {
		return authFailed("The signature has no expiry time (se), neither in the SAS nor in a stored access policy.")
	}
	st, se := "", odata.TimeOf(*expiry).Format(http.TimeFormat)
	if start != nil {
		st = odata.TimeOf(*start).Format(http.TimeFormat)
		if *expiry <= *start {
			return authFailed("Signed expiry time [%s] has to be after signed start time [%s].", se, st)
		}
	}
	if (start != nil && now.Add(sasStartSkew).Before(odata.TimeOf(*start))) || !now.Before(odata.TimeOf(*expiry)) {
		return authFailed("Signature not valid in the specified time frame: Start [%s] - Expiry [%s] - Current [%s]", st, se, now.Format(http.TimeFormat))
	}
	ip, https, known := clientOrigin(rq.r())
	if v.sip != "" {
		lo, hi, ok := parseIPRange(v.sip)
		if !ok {
			return authFailed("The signed IP range (sip) '%s' is not an address or a range of addresses.", v.sip)
		}
		if !known || ip.Is4() != lo.Is4() || ip.Compare(lo) < 0 || ip.Compare(hi) > 0 {
			return odata.Detailf(errSourceIPMismatch, "This request is not authorized to perform this operation using this source IP %s.", ip)
		}
	}
	switch v.spr {
	case "", "https,http", "http,https":
	case "https":
		if !https {
			return odata.Detailf(errProtocolMismatch, "This request is not authorized to perform this operation using this protocol. The signature allows HTTPS only (spr=https).")
		}
	default:
		return authFailed("The signed protocol (spr) '%s' is not https or https,http.", v.spr)
	}
	return nil
}

// parseIPRange reads sip: one address, or two of the same family joined by
// '-', the first not above the second.
func parseIPRange(s string) (lo, hi netip.Addr, ok bool) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err := netip.ParseAddr(strings.TrimSpace(a))
	if err != nil {
		return lo, hi, false
	}
	lo = lo.Unmap()
	hi = lo
	if isRange {
		if hi, err = netip.ParseAddr(strings.TrimSpace(b)); err != nil {
			return lo, hi, false
		}
		hi = hi.Unmap()
		if hi.Is4() != lo.Is4() || hi.Compare(lo) < 0 {
			return lo, hi, false
		}
	}
	return lo, hi, true
}

// sasKeyRange reads the key range of a service SAS. A RowKey bound needs
// its PartitionKey bound; a bound PostgreSQL cannot hold as text (U+0000,
// invalid UTF-8) cannot be honoured and is refused rather than ignored.
func sasKeyRange(v *sasValues) (store.KeyRange, error) {
	var r store.KeyRange
	for _, s := range []string{v.spk, v.srk, v.epk, v.erk} {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return r, authFailed("The signed key range holds a key that is not valid UTF-8 text.")
		}
	}
	if v.srk != "" && v.spk == "" {
		return r, authFailed("The signed start row key (srk) must come with a start partition key (spk).")
	}
	if v.erk != "" && v.epk == "" {
		return r, authFailed("The signed end row key (erk) must come with an end partition key (epk).")
	}
	if v.spk != "" {
		r.Lower = &store.KeyBound{PK: v.spk, RK: v.srk, HasRK: v.srk != ""}
	}
	if v.epk != "" {
		r.Upper = &store.KeyBound{PK: v.epk, RK: v.erk, HasRK: v.erk != ""}
	}
	return r, nil
}

// authOp is what a request (or a batch operation) does, as far as
// authorization is concerned.
type authOp uint8

const (
	authUnknown authOp = iota
	authQueryTables
	authGetTable
	authCreateTable
	authDeleteTable
	authGetACL
	authSetACL
	authGetServiceProperties
	authSetServiceProperties
	authGetServiceStats
	authQueryEntities
	authGetEntity
	authInsertEntity
	authUpdateEntity
	authMergeEntity
	authUpsertReplace
	authUpsertMerge
	authDeleteEntity
	authBatch
	authManageIndexes // the property index API (indexes.go)
)

// authRule is what a SAS needs for an operation: the account SAS resource
// type (0: no account SAS may do it), and permission letters, each string
// a set of alternatives of which the SAS must hold one.
type authRule struct {
	resourceType byte
	perms        []string
	entity       bool // an entity operation, which a service SAS may do
}

// authRules follows rest-protocol.md §8.6 and §8.7 (Azure's documentation,
// where Azurite is looser). Table ACLs are for the account key only.
var authRules = map[authOp]authRule{
	authGetServiceProperties: {'s', []string{"r"}, false},
	authGetServiceStats:      {'s', []string{"r"}, false},
	authSetServiceProperties: {'s', []string{"w"}, false},
	authQueryTables:          {'c', []string{"l"}, false},
	authGetTable:             {'c', []string{"rl"}, false},
	authCreateTable:          {'c', []string{"acw"}, false},
	authDeleteTable:          {'c', []string{"d"}, false},
	authGetACL:               {0, nil, false},
	authSetACL:               {0, nil, false},
	authQueryEntities:        {'o', []string{"r"}, true},
	authGetEntity:            {'o', []string{"r"}, true},
	authInsertEntity:         {'o', []string{"a"}, true},
	authUpdateEntity:         {'o', []string{"u"}, true},
	authMergeEntity:          {'o', []string{"u"}, true},
	authUpsertReplace:        {'o', []string{"a", "u"}, true},
	authUpsertMerge:          {'o', []string{"a", "u"}, true},
	authDeleteEntity:         {'o', []string{"d"}, true},
}

// Azure's messages for authorization errors; details follow them.
const (
	msgAuthorizationFailure = "This request is not authorized to perform this operation."
	msgPermissionMismatch   = "This request is not authorized to perform this operation using this permission."
	msgResourceTypeMismatch = "This request is not authorized to perform this operation using this resource type."
)

// classifyOperation names the operation of a routed request with its
// effective method (X-HTTP-Method applied).
func classifyOperation(t *target, method string, query url.Values, h http.Header) authOp {
	switch t.kind {
	case resService:
		if query.Get("restype") != "service" {
			return authUnknown
		}
		switch comp := query.Get("comp"); {
		case comp == "properties" && method == http.MethodGet:
			return authGetServiceProperties
		case comp == "properties" && method == http.MethodPut:
			return authSetServiceProperties
		case comp == "stats" && method == http.MethodGet:
			return authGetServiceStats
		}
	case resTables:
		switch method {
		case http.MethodGet:
			return authQueryTables
		case http.MethodPost:
			return authCreateTable
		}
	case resTable:
		switch method {
		case http.MethodGet:
			return authGetTable
		case http.MethodDelete:
			return authDeleteTable
		}
	case resEntitySet:
		if query.Has("comp") {
			switch {
			case query.Get("comp") != "acl":
			case method == http.MethodGet:
				return authGetACL
			case method == http.MethodPut:
				return authSetACL
			}
			return authUnknown
		}
		switch method {
		case http.MethodGet:
			return authQueryEntities
		case http.MethodPost:
			return authInsertEntity
		}
	case resEntity:
		return entityOperation(method, h.Values("If-Match") != nil)
	case resBatch:
		if method == http.MethodPost {
			return authBatch
		}
	}
	return authUnknown
}

// entityOperation names an operation on one entity; conditional is whether
// it carries If-Match, which makes a PUT or MERGE an update rather than an
// upsert.
func entityOperation(method string, conditional bool) authOp {
	switch method {
	case http.MethodGet:
		return authGetEntity
	case http.MethodPut:
		if conditional {
			return authUpdateEntity
		}
		return authUpsertReplace
	case "MERGE", http.MethodPatch:
		if conditional {
			return authMergeEntity
		}
		return authUpsertMerge
	case http.MethodDelete:
		return authDeleteEntity
	}
	return authUnknown
}

// writeOperation names the operation of a batch write.
func writeOperation(w *store.Write) authOp {
	switch w.Op {
	case store.OpInsert:
		return authInsertEntity
	case store.OpReplace:
		if w.Match.Conditional() {
			return authUpdateEntity
		}
		return authUpsertReplace
	case store.OpMerge:
		if w.Match.Conditional() {
			return authMergeEntity
		}
		return authUpsertMerge
	case store.OpDelete:
		return authDeleteEntity
	}
	return authUnknown
}

// authorize checks that the grant allows op on table (the addressed table
// for entity operations). A batch as a whole is allowed: each of its
// operations is checked on its own.
func (g *sasGrant) authorize(op authOp, table string) error {
	if op == authBatch {
		return nil
	}
	rule, known := authRules[op]
	if !known {
		return odata.Detailf(errAuthorizationFailure, msgAuthorizationFailure+" A shared access signature cannot authorize this request.")
	}
	switch g.kind {
	case serviceSAS:
		if !rule.entity {
			return odata.Detailf(errAuthorizationFailure, msgAuthorizationFailure+" A service SAS grants access to the entities of one table only; table, ACL and service operations need an account SAS or the account key.")
		}
		if !strings.EqualFold(table, g.table) {
			return odata.Detailf(errAuthorizationFailure, msgAuthorizationFailure+" The signature is for table '%s', not '%s'.", g.table, table)
		}
	case accountSAS:
		if rule.resourceType == 0 {
			return odata.Detailf(errAuthorizationFailure, msgAuthorizationFailure+" Table ACLs can be read and set with the account key only.")
		}
		if strings.IndexByte(g.resourceTypes, rule.resourceType) < 0 {
			return odata.Detailf(errResourceTypeMismatch, msgResourceTypeMismatch+" The operation needs resource type '%c'; the signature grants '%s'.", rule.resourceType, g.resourceTypes)
		}
	}
	for _, alternatives := range rule.perms {
		if !strings.ContainsAny(g.perms, alternatives) {
			return odata.Detailf(errPermissionMismatch, msgPermissionMismatch+" The operation needs permission %s; the signature grants '%s'.", permissionText(rule.perms), g.perms)
		}
	}
	return nil
}

// permissionText describes what an operation needs, e.g. 'a' and 'u', or
// one of 'acw'.
func permissionText(perms []string) string {
	parts := make([]string, len(perms))
	for i, p := range perms {
		if len(p) == 1 {
			parts[i] = "'" + p + "'"
		} else {
			parts[i] = "one of '" + p + "'"
		}
	}
	return strings.Join(parts, " and ")
}

// checkKeys checks that an entity key lies in a service SAS's key range.
func (g *sasGrant) checkKeys(pk, rk string) error {
	if g.kind != serviceSAS || g.keys.Contains(pk, rk) {
		return nil
	}
	return odata.Detailf(errAuthorizationFailure, msgAuthorizationFailure+" The entity's keys lie outside the signature's key range.")
}

// keyRange is a service SAS's key range.
func (g *sasGrant) keyRange() (store.KeyRange, bool) { return g.keys, g.kind == serviceSAS }

// authorize checks the request's operation against its grant, if it has
// one, before the handler touches any data; for an operation on one
// entity that includes the keys.
func (rq *request) authorize(method string) error {
	if rq.grant == nil {
		return nil
	}
	op := classifyOperation(rq.t, method, rq.query, rq.r().Header)
	if err := rq.grant.authorize(op, rq.t.table); err != nil {
		return err
	}
	if rq.t.kind == resEntity {
		return rq.grant.checkKeys(rq.t.pk, rq.t.rk)
	}
	return nil
}

// authorizeTable checks an operation on a table that only the request's
// body names (Create Table) against the grant.
func (rq *request) authorizeTable(op authOp, table string) error {
	if rq.grant == nil {
		return nil
	}
	return rq.grant.authorize(op, table)
}

// authorizeKeys checks the keys of an entity to insert, which only its
// body names, against the grant.
func (rq *request) authorizeKeys(pk, rk string) error {
	if rq.grant == nil {
		return nil
	}
	return rq.grant.checkKeys(pk, rk)
}

// clipQuery limits a query to the grant's key range: entities outside it
// are never returned, and paging stays within it.
func (rq *request) clipQuery(q *store.EntityQuery) {
	if rq.grant == nil {
		return
	}
	if r, ok := rq.grant.keyRange(); ok {
		q.Range = r
	}
}

// authorizeBatchWrite checks one write of a batch against the grant: its
// table, its operation's permissions and its keys.
func (rq *request) authorizeBatchWrite(table string, w *store.Write) error {
	if rq.grant == nil {
		return nil
	}
	if err := rq.grant.authorize(writeOperation(w), table); err != nil {
		return err
	}
	return rq.grant.checkKeys(w.PartitionKey, w.RowKey)
}

// authorizeBatchRead checks the GET of a query batch against the grant.
func (rq *request) authorizeBatchRead(t *target) error {
	if rq.grant == nil {
		return nil
	}
	op := authQueryEntities
	if t.kind == resEntity {
		op = authGetEntity
	}
	if err := rq.grant.authorize(op, t.table); err != nil {
		return err
	}
	if t.kind == resEntity {
		return rq.grant.checkKeys(t.pk, t.rk)
	}
	return nil
}
