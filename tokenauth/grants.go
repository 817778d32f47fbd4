package tokenauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Permission is a set of things an identity may do on tables.
type Permission uint8

// The permissions a grant gives. What each one allows on the protocol's
// operations is httpapi's business (and the README's).
const (
	// Read lists and reads tables and reads entities.
	Read Permission = 1 << iota
	// Write creates tables and inserts, updates, merges and upserts
	// entities.
	Write
	// Delete deletes tables and entities.
	Delete
	// Manage reads and sets table ACLs (stored access policies) and the
	// service's properties and statistics.
	Manage
)

var permissionNames = []struct {
	name string
	p    Permission
}{{"read", Read}, {"write", Write}, {"delete", Delete}, {"manage", Manage}}

// String names the permissions, e.g. "read,write".
func (p Permission) String() string {
	var names []string
	for _, n := range permissionNames {
		if p&n.p != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// Grant is what an identity may do on one account: on every table, on one
// table, or on the tables whose names start with a prefix.
type Grant struct {
	Account string // "*": every account
	// Table is a table name (compared case-insensitively, as table names
	// are), a prefix when Prefix is set, or empty for every table.
	Table  string
	Prefix bool
	Perms  Permission
}

// AccountWide reports whether g covers every table of its account(s).
func (g Grant) AccountWide() bool { return g.Table == "" }

// Covers reports whether g applies to table of account (an empty table:
// the account as a whole, which only an account-wide grant covers).
func (g Grant) Covers(account, table string) bool {
	if g.Account != "*" && g.Account != account {
		return false
	}
	switch {
	case g.Table == "":
		return true
	case table == "":
		return false
	case g.Prefix:
		return len(table) >= len(g.Table) && strings.EqualFold(table[:len(g.Table)], g.Table)
	}
	return strings.EqualFold(table, g.Table)
}

// Built-in Azure role names, which grant without any configured rule.
const (
	RoleTableDataReader      = "Storage Table Data Reader"
	RoleTableDataContributor = "Storage Table Data Contributor"
)

// Rule maps a claim value to a grant. In JSON:
//
//	{"claim": "roles", "value": "tables-reader", "account": "*", "permissions": ["read"]}
//	{"issuer": "https://keycloak.example.com/realms/apps", "claim": "sub", "value": "f81d...",
//	 "account": "orders", "table": "invoices*", "permissions": ["read", "write", "delete"]}
type Rule struct {
	// Issuer, when set, limits the rule to tokens of that issuer:
	// subjects are unique per issuer only.
	Issuer string `json:"issuer,omitempty"`
	// Claim names the claim: a top-level name such as roles, groups, sub
	// or oid, or a dotted path into nested objects such as
	// realm_access.roles (Keycloak). The claim matches when it is the
	// string Value or an array holding it.
	Claim string `json:"claim"`
	Value string `json:"value"`
	// Account is an account name or "*".
	Account string `json:"account"`
	// Table is empty (every table), a table name, or a prefix ending in
	// "*" ("logs*").
	Table string `json:"table,omitempty"`
	// Permissions: read, write, delete, manage.
	Permissions []string `json:"permissions"`

	grant Grant
}

// Mapper turns identities into grants.
type Mapper struct {
	rules []Rule
}

// NewMapper returns a Mapper of rules; without rules it grants by the
// built-in Azure role names in the roles claim (DefaultRules).
func NewMapper(rules []Rule) (*Mapper, error) {
	if len(rules) == 0 {
		rules = DefaultRules()
	}
	m := &Mapper{}
	for n, r := range rules {
		if err := r.compile(); err != nil {
			return nil, fmt.Errorf("grant rule %d: %w", n+1, err)
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

// DefaultRules grant what Azure's built-in roles grant, on every account,
// to tokens whose roles claim names them.
func DefaultRules() []Rule {
	return []Rule{
		{Claim: "roles", Value: RoleTableDataReader, Account: "*", Permissions: []string{"read"}},
		{Claim: "roles", Value: RoleTableDataContributor, Account: "*", Permissions: []string{"read", "write", "delete"}},
	}
}

// ParseRules reads rules from s: a JSON array, or the name of a file
// holding one. NewMapper checks them.
func ParseRules(s string) ([]Rule, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	b := []byte(s)
	if !strings.HasPrefix(s, "[") {
		var err error
		if b, err = os.ReadFile(s); err != nil {
			return nil, fmt.Errorf("grant rules: %w", err)
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var rules []Rule
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("grant rules: %w", err)
	}
	if len(rules) == 0 {
		return nil, errors.New("grant rules: the list is empty")
	}
	return rules, nil
}

func (r *Rule) compile() error {
	if r.Claim == "" || r.Value == "" {
		return errors.New("claim and value are required")
	}
	if r.Account == "" {
		return errors.New(`account is required ("*" for every account)`)
	}
	g := Grant{Account: r.Account, Table: r.Table}
	if t, ok := strings.CutSuffix(r.Table, "*"); ok {
		g.Table, g.Prefix = t, true
		if t == "" {
			g.Prefix = false // "*": every table
		}
	}
	if strings.ContainsAny(g.Table, "*") {
		return fmt.Errorf("table %q: only a trailing * is allowed", r.Table)
	}
	if len(r.Permissions) == 0 {
		return errors.New("permissions are required (read, write, delete, manage)")
	}
	for _, p := range r.Permissions {
		known := false
		for _, n := range permissionNames {
			if strings.EqualFold(p, n.name) {
				g.Perms |= n.p
				known = true
			}
		}
		if !known {
			return fmt.Errorf("permission %q: want read, write, delete or manage", p)
		}
	}
	r.grant = g
	return nil
}

// Grants returns the grants of id, one per matching rule.
func (m *Mapper) Grants(id *Identity) []Grant {
	var out []Grant
	for _, r := range m.rules {
		if r.Issuer != "" && r.Issuer != id.Issuer {
			continue
		}
		if claimHolds(id.Claims, r.Claim, r.Value) {
			out = append(out, r.grant)
		}
	}
	return out
}

// claimHolds reports whether the claim named name is value or an array
// holding it. A name is looked up as a top-level claim first (claim names
// may hold dots, e.g. URLs), then as a dotted path into nested objects.
func claimHolds(claims map[string]any, name, value string) bool {
	v, ok := claims[name]
	if !ok && strings.Contains(name, ".") {
		var cur any = claims
		for _, part := range strings.Split(name, ".") {
			obj, isObj := cur.(map[string]any)
			if !isObj {
				return false
			}
			if cur, ok = obj[part]; !ok {
				return false
			}
		}
		v = cur
	}
	switch c := v.(type) {
	case string:
		return c == value
	case []any:
		for _, e := range c {
			if s, ok := e.(string); ok && s == value {
				return true
			}
		}
	}
	return false
}
