package httpapi

import (
	"errors"
	"testing"

	"github.com/pgtables/pgtables/tokenauth"
)

func TestTokenGrantAuthorize(t *testing.T) {
	t.Parallel()
	const r, w, d, m = tokenauth.Read, tokenauth.Write, tokenauth.Delete, tokenauth.Manage
	reader := []tokenauth.Grant{{Account: "*", Perms: r}}
	contributor := []tokenauth.Grant{{Account: "*", Perms: r | w | d}}
	logs := []tokenauth.Grant{{Account: "acct", Table: "logs", Prefix: true, Perms: r | w | d}}
	orders := []tokenauth.Grant{{Account: "acct", Table: "Orders", Perms: r}}
	manager := []tokenauth.Grant{{Account: "acct", Perms: m}}
	for _, tc := range []struct {
		name   string
		grants []tokenauth.Grant
		op     authOp
		table  string
		ok     bool
	}{
		{"reader queries entities", reader, authQueryEntities, "t", true},
		{"reader lists tables", reader, authQueryTables, "", true},
		{"reader cannot insert", reader, authInsertEntity, "t", false},
		{"reader cannot upsert", reader, authUpsertMerge, "t", false},
		{"reader cannot create a table", reader, authCreateTable, "", false},
		{"reader cannot delete an entity", reader, authDeleteEntity, "t", false},
		{"reader cannot read the ACL", reader, authGetACL, "t", false},
		{"reader cannot read service properties", reader, authGetServiceProperties, "", false},
		{"contributor creates a table", contributor, authCreateTable, "t", true},
		{"contributor deletes a table", contributor, authDeleteTable, "t", true},
		{"contributor writes", contributor, authUpdateEntity, "t", true},
		{"contributor deletes", contributor, authDeleteEntity, "t", true},
		{"contributor cannot set the ACL", contributor, authSetACL, "t", false},
		{"contributor cannot set service properties", contributor, authSetServiceProperties, "", false},
		{"a batch as a whole", reader, authBatch, "t", true},
		{"prefix grant on a matching table", logs, authInsertEntity, "logs2026", true},
		{"prefix grant creates a matching table (before the body)", logs, authCreateTable, "", true},
		{"prefix grant creates a matching table", logs, authCreateTable, "LogsB", true},
		{"prefix grant on another table", logs, authInsertEntity, "orders", false},
		{"prefix grant cannot create another table", logs, authCreateTable, "orders", false},
		{"table grant cannot list tables", orders, authQueryTables, "", false},
		{"table grant reads its table in any case", orders, authGetEntity, "ORDERS", true},
		{"table grant reads its table's row in Tables", orders, authGetTable, "orders", true},
		{"manage reads the ACL", manager, authGetACL, "t", true},
		{"manage sets service properties", manager, authSetServiceProperties, "", true},
		{"manage is not read", manager, authQueryEntities, "t", false},
		{"nothing at all", nil, authGetEntity, "t", false},
		{"an unknown operation with no grant", nil, authUnknown, "t", false},
		{"an unknown operation is left to the handler", reader, authUnknown, "t", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &tokenGrant{account: "acct", grants: tc.grants}
			err := g.authorize(tc.op, tc.table)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, errPermissionMismatch) {
				t.Fatalf("got %v, want AuthorizationPermissionMismatch", err)
			}
		})
	}
}

func TestChallengeURI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ issuer, want string }{
		{"https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0", "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/authorize"},
		{"https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/", "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/oauth2/authorize"},
		{"https://keycloak.example.com/realms/apps", "https://keycloak.example.com/realms/apps"},
		{"https://kubernetes.default.svc", "https://kubernetes.default.svc"},
	} {
		if got := ChallengeURI(tc.issuer); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.issuer, got, tc.want)
		}
	}
}
