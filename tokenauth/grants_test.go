package tokenauth_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pgtables/pgtables/tokenauth"
)

func identity(t *testing.T, issuer, claimsJSON string) *tokenauth.Identity {
	t.Helper()
	var claims map[string]any
	if err := json.Unmarshal([]byte(claimsJSON), &claims); err != nil {
		t.Fatal(err)
	}
	return &tokenauth.Identity{Issuer: issuer, Claims: claims}
}

func TestDefaultRulesFollowAzureRoles(t *testing.T) {
	t.Parallel()
	m, err := tokenauth.NewMapper(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, claims string
		want         []tokenauth.Grant
	}{
		{"reader", `{"roles":["Storage Table Data Reader"]}`, []tokenauth.Grant{{Account: "*", Perms: tokenauth.Read}}},
		{"contributor", `{"roles":["Storage Table Data Contributor"]}`, []tokenauth.Grant{{Account: "*", Perms: tokenauth.Read | tokenauth.Write | tokenauth.Delete}}},
		{"role as a string", `{"roles":"Storage Table Data Reader"}`, []tokenauth.Grant{{Account: "*", Perms: tokenauth.Read}}},
		{"other roles", `{"roles":["Storage Blob Data Owner","Owner"]}`, nil},
		{"case matters", `{"roles":["storage table data reader"]}`, nil},
		{"no roles", `{"sub":"Storage Table Data Reader"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.Grants(identity(t, "https://idp", tc.claims)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestConfiguredRules(t *testing.T) {
	t.Parallel()
	rules, err := tokenauth.ParseRules(`[
		{"claim": "groups", "value": "g-readers", "account": "*", "permissions": ["read"]},
		{"claim": "realm_access.roles", "value": "tables-admin", "account": "acct1", "permissions": ["read", "write", "delete", "manage"]},
		{"issuer": "https://a", "claim": "sub", "value": "svc", "account": "acct1", "table": "logs*", "permissions": ["write"]},
		{"claim": "https://example.com/tenant", "value": "t1", "account": "acct2", "table": "Orders", "permissions": ["READ"]}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tokenauth.NewMapper(rules)
	if err != nil {
		t.Fatal(err)
	}
	logs := tokenauth.Grant{Account: "acct1", Table: "logs", Prefix: true, Perms: tokenauth.Write}
	for _, tc := range []struct {
		name, issuer, claims string
		want                 []tokenauth.Grant
	}{
		{"group", "https://a", `{"groups":["x","g-readers"]}`, []tokenauth.Grant{{Account: "*", Perms: tokenauth.Read}}},
		{"nested Keycloak role", "https://a", `{"realm_access":{"roles":["tables-admin"]}}`, []tokenauth.Grant{{Account: "acct1", Perms: tokenauth.Read | tokenauth.Write | tokenauth.Delete | tokenauth.Manage}}},
		{"subject of its issuer", "https://a", `{"sub":"svc"}`, []tokenauth.Grant{logs}},
		{"same subject, other issuer", "https://b", `{"sub":"svc"}`, nil},
		{"claim name with dots", "https://b", `{"https://example.com/tenant":"t1"}`, []tokenauth.Grant{{Account: "acct2", Table: "Orders", Perms: tokenauth.Read}}},
		{"built-in role names mean nothing once rules are set", "https://a", `{"roles":["Storage Table Data Contributor"]}`, nil},
		{"several rules", "https://a", `{"sub":"svc","groups":["g-readers"]}`, []tokenauth.Grant{{Account: "*", Perms: tokenauth.Read}, logs}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.Grants(identity(t, tc.issuer, tc.claims)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestGrantCovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		g              tokenauth.Grant
		account, table string
		want           bool
	}{
		{tokenauth.Grant{Account: "*"}, "a", "", true},
		{tokenauth.Grant{Account: "*"}, "a", "t", true},
		{tokenauth.Grant{Account: "a"}, "b", "t", false},
		{tokenauth.Grant{Account: "a", Table: "Orders"}, "a", "orders", true},
		{tokenauth.Grant{Account: "a", Table: "Orders"}, "a", "orders2", false},
		{tokenauth.Grant{Account: "a", Table: "Orders"}, "a", "", false},
		{tokenauth.Grant{Account: "a", Table: "logs", Prefix: true}, "a", "LOGS2026", true},
		{tokenauth.Grant{Account: "a", Table: "logs", Prefix: true}, "a", "log", false},
	} {
		if got := tc.g.Covers(tc.account, tc.table); got != tc.want {
			t.Errorf("%+v covers %s/%s: got %v, want %v", tc.g, tc.account, tc.table, got, tc.want)
		}
	}
}

func TestParseRulesFromFileAndErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "grants.json")
	if err := os.WriteFile(path, []byte(`[{"claim":"oid","value":"x","account":"*","permissions":["read"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if rules, err := tokenauth.ParseRules(path); err != nil || len(rules) != 1 {
		t.Fatalf("from a file: %v, %v", rules, err)
	}
	for _, bad := range []string{
		`[]`,
		`[{"claim":"oid","value":"x","account":"*","permissions":["read"],"extra":1}]`,
		`[{"claim":"oid","value":"x","account":"*","permissions":["admin"]}]`,
		`[{"claim":"oid","value":"x","account":"*","permissions":[]}]`,
		`[{"claim":"","value":"x","account":"*","permissions":["read"]}]`,
		`[{"claim":"oid","value":"x","permissions":["read"]}]`,
		`[{"claim":"oid","value":"x","account":"a","table":"a*b","permissions":["read"]}]`,
		filepath.Join(t.TempDir(), "missing.json"),
	} {
		rules, err := tokenauth.ParseRules(bad)
		if err == nil {
			_, err = tokenauth.NewMapper(rules)
		}
		if err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
