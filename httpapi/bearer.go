package httpapi

import (
	"errors"
	"net/url"
	"strings"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
	"github.com/pgtables/pgtables/tokenauth"
)

// Bearer tokens (rest-protocol.md §8.9): tokenauth verifies a token and
// maps its claims to grants; this file answers in Azure's terms. A request
// without credentials, or with a token that does not verify, gets 401 and
// a WWW-Authenticate challenge naming the authority, from which the SDKs
// learn the tenant; a valid token whose grants do not cover the operation
// gets 403 AuthorizationPermissionMismatch, as an Entra ID identity without
// the role gets from Azure.

// BearerConfig turns bearer tokens on.
type BearerConfig struct {
	Verifier *tokenauth.Verifier
	Mapper   *tokenauth.Mapper
	// AllowHTTP accepts tokens on plain-http requests. The SDKs send
	// tokens over https only; a proxy that terminates TLS says so in
	// X-Forwarded-Proto (Config.TrustedProxies).
	AllowHTTP bool
	// AuthorizationURI is the authorization_uri of the 401 challenge;
	// empty: ChallengeURI of the first issuer.
	AuthorizationURI string
}

// storageResource is the resource_id of the challenge: the SDKs turn it
// into the scope they ask tokens for (https://storage.azure.com/.default).
const storageResource = "https://storage.azure.com"

// errBearerOverHTTP: a token sent over plain http (403 AuthenticationFailed).
var errBearerOverHTTP = errors.New("bearer token over http")

// bearerMinVersion is the first x-ms-version with bearer tokens in Azure.
const bearerMinVersion = "2017-11-09"

// ChallengeURI is the authorization_uri of the challenge for issuer. For a
// Microsoft Entra ID issuer (https://login.microsoftonline.com/<tenant>/v2.0
// or https://sts.windows.net/<tenant>/) it is Azure's own,
// https://login.microsoftonline.com/<tenant>/oauth2/authorize; for any
// other issuer the issuer URL itself, from which a client finds the
// discovery document. The SDKs take the tenant from its first path
// segment.
func ChallengeURI(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return issuer
	}
	tenant, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	switch strings.ToLower(u.Host) {
	case "login.microsoftonline.com", "sts.windows.net":
		if tenant != "" {
			return "https://login.microsoftonline.com/" + tenant + "/oauth2/authorize"
		}
	}
	return issuer
}

// challenge is the WWW-Authenticate value of a 401, space-separated and
// unquoted as Azure writes it (the JavaScript SDK splits it on spaces).
func (b *BearerConfig) challenge() string {
	uri := b.AuthorizationURI
	if uri == "" {
		uri = ChallengeURI(b.Verifier.Issuers()[0])
	}
	return "Bearer authorization_uri=" + uri + " resource_id=" + storageResource
}

// authenticateBearer verifies the token of rq and returns its grants on
// the request's account.
func (s *Server) authenticateBearer(rq *request, token string) (grant, error) {
	b := s.cfg.Bearer
	r := rq.r()
	if !b.AllowHTTP && !requestOrigin(r).https {
		return nil, &authError{kind: errBearerOverHTTP, detail: "Authentication scheme Bearer is not allowed with HTTP; use HTTPS."}
	}
	if v := r.Header.Get("x-ms-version"); v != "" && v < bearerMinVersion {
		return nil, authFailed("Authentication scheme Bearer is not supported in this version (%s); use %s or later.", v, bearerMinVersion)
	}
	id, err := b.Verifier.Verify(r.Context(), token)
	if errors.Is(err, tokenauth.ErrUnavailable) {
		s.log.Warn("bearer token not verified: issuer keys unavailable", "request_id", rq.id, "err", err)
		return nil, odata.Detailf(store.ErrUnavailable, "The token's issuer could not be reached for its signing keys. Please retry your request.")
	}
	if err != nil {
		return nil, &authError{kind: errInvalidAuthInfo, detail: tokenFailure(err)}
	}
	if st := stateOf(r); st != nil {
		st.subject = id.Subject
	}
	g := &tokenGrant{account: rq.acct.Name}
	for _, gr := range b.Mapper.Grants(id) {
		if gr.Account == "*" || gr.Account == rq.acct.Name {
			g.grants = append(g.grants, gr)
		}
	}
	return g, nil
}

// tokenFailure is the AuthenticationErrorDetail of a refused token, in
// the words of Azure's where it has them.
func tokenFailure(err error) string {
	prefix := "The token is not valid."
	switch {
	case errors.Is(err, tokenauth.ErrExpired):
		prefix = "Lifetime validation failed. The token is expired."
	case errors.Is(err, tokenauth.ErrNotYetValid):
		prefix = "Lifetime validation failed. The token is not yet valid."
	case errors.Is(err, tokenauth.ErrAudience):
		prefix = "Audience validation failed. Audience did not match."
	case errors.Is(err, tokenauth.ErrIssuer):
		prefix = "Issuer validation failed. Issuer did not match."
	case errors.Is(err, tokenauth.ErrSignature), errors.Is(err, tokenauth.ErrUnknownKey), errors.Is(err, tokenauth.ErrAlgorithm):
		prefix = "Signature validation failed."
	case errors.Is(err, tokenauth.ErrTooLarge), errors.Is(err, tokenauth.ErrMalformed):
		prefix = "The token is malformed."
	}
	return prefix + " " + odata.Truncate(err.Error(), 200)
}

// tokenGrant is what a verified token may do on one account.
type tokenGrant struct {
	account string
	grants  []tokenauth.Grant // those on this account
}

// tokenRule is what a token needs for an operation: a permission, on the
// addressed table or (accountWide) on every table of the account.
type tokenRule struct {
	perm        tokenauth.Permission
	accountWide bool
}

// tokenRules follow Azure's built-in roles: Storage Table Data Reader
// reads (read), Storage Table Data Contributor also creates and writes
// (write) and deletes (delete). Table ACLs and the service's properties
// need manage, which neither role holds: in Azure they are the account
// owner's. Listing tables needs read on the whole account.
var tokenRules = map[authOp]tokenRule{
	authQueryTables:          {tokenauth.Read, true},
	authGetTable:             {tokenauth.Read, false},
	authCreateTable:          {tokenauth.Write, false},
	authDeleteTable:          {tokenauth.Delete, false},
	authGetACL:               {tokenauth.Manage, false},
	authSetACL:               {tokenauth.Manage, false},
	authGetServiceProperties: {tokenauth.Manage, true},
	authSetServiceProperties: {tokenauth.Manage, true},
	authGetServiceStats:      {tokenauth.Manage, true},
	authQueryEntities:        {tokenauth.Read, false},
	authGetEntity:            {tokenauth.Read, false},
	authInsertEntity:         {tokenauth.Write, false},
	authUpdateEntity:         {tokenauth.Write, false},
	authMergeEntity:          {tokenauth.Write, false},
	authUpsertReplace:        {tokenauth.Write, false},
	authUpsertMerge:          {tokenauth.Write, false},
	authDeleteEntity:         {tokenauth.Delete, false},
	// Property indexes change what every write of the table costs: an
	// owner's decision, as ACLs are.
	authManageIndexes: {tokenauth.Manage, false},
}

// authorize checks that the token's grants allow op on table. A batch as a
// whole is allowed: each of its operations is checked on its own. Create
// Table is checked before its body is read (table "": some table) and
// again with the name it names.
func (g *tokenGrant) authorize(op authOp, table string) error {
	if op == authBatch {
		return nil
	}
	rule, known := tokenRules[op]
	if !known {
		// Not an operation (the handler refuses it as for a key); but
		// only to someone with some grant here.
		if len(g.grants) == 0 {
			return odata.Detailf(errPermissionMismatch, msgPermissionMismatch+" The token grants nothing on account '%s'.", g.account)
		}
		return nil
	}
	for _, gr := range g.grants {
		if gr.Perms&rule.perm == 0 {
			continue
		}
		switch {
		case rule.accountWide && gr.AccountWide():
			return nil
		case rule.accountWide:
		case op == authCreateTable && table == "":
			return nil
		case gr.Covers(g.account, table):
			return nil
		}
	}
	where := "account '" + g.account + "'"
	if !rule.accountWide && table != "" {
		where = "table '" + table + "' of " + where
	} else if rule.accountWide {
		where = "every table of " + where
	}
	return odata.Detailf(errPermissionMismatch, msgPermissionMismatch+" The operation needs permission %s on %s.", rule.perm, where)
}

// checkKeys: a token's grants are on tables, not on key ranges.
func (g *tokenGrant) checkKeys(string, string) error { return nil }

// keyRange: a token's grants are on tables, not on key ranges.
func (g *tokenGrant) keyRange() (store.KeyRange, bool) { return store.KeyRange{}, false }
