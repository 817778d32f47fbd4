package integration

import (
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/store"
)

// TestConfiguredAccounts runs a server with accounts configured as
// PGTABLES_ACCOUNTS gives them: one account with two keys (rotation) and a
// second account. Either key of an account is accepted, the other
// account's key is not, the development account no longer exists, and two
// accounts' tables of one name are independent.
func TestConfiguredAccounts(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	key := func(seed string) string {
		b := make([]byte, 64)
		for i := range b {
			b[i] = seed[i%len(seed)] + byte(i)
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	alphaOld, alphaNew, betaKey := key("alpha-old"), key("alpha-new"), key("beta")
	accts, err := httpapi.ParseAccounts("alpha:" + alphaOld + ":" + alphaNew + ";beta:" + betaKey)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvConfig(t, store.Options{}, httpapi.Config{Version: "test", Accounts: accts})

	client := func(account, key string) *aztables.ServiceClient {
		t.Helper()
		cred, err := aztables.NewSharedKeyCredential(account, key)
		if err != nil {
			t.Fatal(err)
		}
		s, err := aztables.NewServiceClientWithSharedKey(e.baseURL+"/"+account, cred, clientOptions())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	alpha1, alpha2, beta := client("alpha", alphaOld), client("alpha", alphaNew), client("beta", betaKey)

	t.Run("EitherKey", func(t *testing.T) {
		if _, err := alpha1.CreateTable(bg, "Shared", nil); err != nil {
			t.Fatalf("create with the first key: %v", err)
		}
		if _, err := alpha2.NewClient("Shared").AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "alpha", "Owner": "alpha"}), nil); err != nil {
			t.Fatalf("insert with the second key: %v", err)
		}
		// Both Shared Key schemes, raw, with the second key.
		for _, scheme := range []string{"SharedKey", "SharedKeyLite"} {
			r := e.send(rawReq{method: http.MethodGet, path: "/alpha/Shared(PartitionKey='p',RowKey='alpha')", account: "alpha", key: alphaNew, scheme: scheme})
			wantStatus(t, r, http.StatusOK)
		}
	})

	t.Run("WrongKeys", func(t *testing.T) {
		before := e.snapshot()
		// beta's key for alpha, alpha's key for beta, and the development
		// account, which is not configured here.
		_, err := client("alpha", betaKey).NewClient("Shared").AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "x"}), nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthenticationFailed")
		_, err = client("beta", alphaOld).CreateTable(bg, "Other", nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthenticationFailed")
		_, err = client(httpapi.DevAccount, httpapi.DevKey).CreateTable(bg, "Other", nil)
		wantRespErr(t, err, http.StatusForbidden, "AuthenticationFailed")
		for _, scheme := range []string{"SharedKey", "SharedKeyLite"} {
			r := e.send(rawReq{method: http.MethodDelete, path: "/alpha/Shared(PartitionKey='p',RowKey='alpha')", header: map[string]string{"If-Match": "*"}, account: "alpha", key: betaKey, scheme: scheme})
			wantError(t, r, http.StatusForbidden, "AuthenticationFailed")
		}
		if after := e.snapshot(); after != before {
			t.Fatalf("a refused request changed the database:\nbefore %s\nafter  %s", before, after)
		}
	})

	t.Run("IndependentTables", func(t *testing.T) {
		// beta creates a table of the same name, in another letter case.
		if _, err := beta.CreateTable(bg, "SHARED", nil); err != nil {
			t.Fatalf("beta's table of the same name: %v", err)
		}
		if _, err := beta.NewClient("shared").AddEntity(bg, mustJSON(t, map[string]any{"PartitionKey": "p", "RowKey": "beta", "Owner": "beta"}), nil); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			svc  *aztables.ServiceClient
			want string
		}{{alpha1, "alpha"}, {beta, "beta"}} {
			got, _ := listAll(t, c.svc.NewClient("Shared"), nil)
			if len(got) != 1 || got[0]["RowKey"] != c.want || got[0]["Owner"] != c.want {
				t.Errorf("%s's table holds %v", c.want, got)
			}
			if names := listTableNames(t, c.svc); len(names) != 1 {
				t.Errorf("%s lists tables %v", c.want, names)
			}
		}
		// Deleting alpha's table leaves beta's.
		if _, err := alpha2.DeleteTable(bg, "shared", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := alpha1.NewClient("Shared").GetEntity(bg, "p", "alpha", nil); err == nil {
			t.Fatal("alpha's deleted table still answers")
		} else {
			wantRespErr(t, err, http.StatusNotFound, "TableNotFound")
		}
		if _, err := beta.NewClient("Shared").GetEntity(bg, "p", "beta", nil); err != nil {
			t.Fatalf("beta's table after alpha deleted its own: %v", err)
		}
	})
}
