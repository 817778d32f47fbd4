package integration

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
)

// TestAccountSASObjects runs every entity operation with account SASes of
// resource type o and each permission: allowed exactly when the SAS holds
// every letter the operation needs; a denial changes nothing.
func TestAccountSASObjects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, sp := range []string{"r", "a", "u", "d", "au", "rwdlacup", "wlcp"} {
		t.Run(sp, func(t *testing.T) {
			t.Parallel()
			owner, table := e.newTable()
			c := e.sasTableClient(table, acctSAS{srt: "o", sp: sp, se: inAnHour()}.encode())
			for i, op := range sasOps {
				existing := fmt.Sprintf("e%d", i)
				sasAdd(t, owner, "p", existing)
				before := e.tableSnapshot(table)
				err := op.run(c, "p", existing, fmt.Sprintf("f%d", i))
				if strings.Trim(op.needs, sp) == "" {
					if err != nil {
						t.Errorf("%s with sp=%s: %v", op.name, sp, err)
					}
					continue
				}
				status, code := respStatus(t, err)
				if status != 403 || code != "AuthorizationPermissionMismatch" {
					t.Errorf("%s with sp=%s: got %d %s, want 403 AuthorizationPermissionMismatch", op.name, sp, status, code)
				}
				if e.tableSnapshot(table) != before {
					t.Errorf("%s with sp=%s was denied but changed the table", op.name, sp)
				}
			}
		})
	}
}

// TestAccountSASResourceTypes checks the service (s), container (c) and
// object (o) resource types against the operations each covers, the
// permission each operation needs, ss, and that Table ACLs are out of an
// account SAS's reach.
func TestAccountSASResourceTypes(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	owner, table := e.newTable()
	sasAdd(t, owner, "p", "r")
	n := 0
	fresh := func() string { n++; return fmt.Sprintf("made%d", n) }
	type op func(svc *aztables.ServiceClient, c *aztables.Client) error
	getProps := func(svc *aztables.ServiceClient, _ *aztables.Client) error {
		_, err := svc.GetProperties(bg, nil)
		return err
	}
	setProps := func(svc *aztables.ServiceClient, _ *aztables.Client) error {
		_, err := svc.SetProperties(bg, aztables.ServiceProperties{}, nil)
		return err
	}
	stats := func(svc *aztables.ServiceClient, _ *aztables.Client) error {
		_, err := svc.GetStatistics(bg, nil)
		return err
	}
	listTables := func(svc *aztables.ServiceClient, _ *aztables.Client) error {
		_, err := svc.NewListTablesPager(nil).NextPage(bg)
		return err
	}
	createTable := func(svc *aztables.ServiceClient, _ *aztables.Client) error {
		_, err := svc.CreateTable(bg, fresh(), nil)
		return err
	}
	deleteTable := func(svc *aztables.ServiceClient, _ *aztables.Client) error {
		name := fresh()
		if _, err := e.service.CreateTable(bg, name, nil); err != nil {
			return err
		}
		_, err := svc.DeleteTable(bg, name, nil)
		return err
	}
	getEntity := func(_ *aztables.ServiceClient, c *aztables.Client) error {
		_, err := c.GetEntity(bg, "p", "r", nil)
		return err
	}
	getACL := func(_ *aztables.ServiceClient, c *aztables.Client) error {
		_, err := c.GetAccessPolicy(bg, nil)
		return err
	}
	setACL := func(_ *aztables.ServiceClient, c *aztables.Client) error {
		_, err := c.SetAccessPolicy(bg, nil)
		return err
	}
	tests := []struct {
		name string
		sas  acctSAS
		op   op
		code string // "" for success
	}{
		{"s r get properties", acctSAS{srt: "s", sp: "r"}, getProps, ""},
		{"s r get stats", acctSAS{srt: "s", sp: "r"}, stats, ""},
		{"s r set properties", acctSAS{srt: "s", sp: "r"}, setProps, "AuthorizationPermissionMismatch"},
		{"s w set properties", acctSAS{srt: "s", sp: "w"}, setProps, ""},
		{"s list tables", acctSAS{srt: "s", sp: "rwdlacup"}, listTables, "AuthorizationResourceTypeMismatch"},
		{"s get entity", acctSAS{srt: "s", sp: "rwdlacup"}, getEntity, "AuthorizationResourceTypeMismatch"},
		{"c l list tables", acctSAS{srt: "c", sp: "l"}, listTables, ""},
		{"c r list tables", acctSAS{srt: "c", sp: "r"}, listTables, "AuthorizationPermissionMismatch"},
		{"c c create table", acctSAS{srt: "c", sp: "c"}, createTable, ""},
		{"c a create table", acctSAS{srt: "c", sp: "a"}, createTable, ""},
		{"c w create table", acctSAS{srt: "c", sp: "w"}, createTable, ""},
		{"c l create table", acctSAS{srt: "c", sp: "lrdu"}, createTable, "AuthorizationPermissionMismatch"},
		{"c d delete table", acctSAS{srt: "c", sp: "d"}, deleteTable, ""},
		{"c get properties", acctSAS{srt: "c", sp: "rwdlacup"}, getProps, "AuthorizationResourceTypeMismatch"},
		{"c get entity", acctSAS{srt: "c", sp: "rwdlacup"}, getEntity, "AuthorizationResourceTypeMismatch"},
		{"o list tables", acctSAS{srt: "o", sp: "rwdlacup"}, listTables, "AuthorizationResourceTypeMismatch"},
		{"o r get entity", acctSAS{srt: "o", sp: "r"}, getEntity, ""},
		{"sco get acl", acctSAS{srt: "sco", sp: "rwdlacup"}, getACL, "AuthorizationFailure"},
		{"sco set acl", acctSAS{srt: "sco", sp: "rwdlacup"}, setACL, "AuthorizationFailure"},
		{"blob only", acctSAS{ss: "b", srt: "sco", sp: "rwdlacup"}, getEntity, "AuthorizationServiceMismatch"},
		{"several services", acctSAS{ss: "bfqt", srt: "sco", sp: "r"}, getEntity, ""},
		{"version 2020-12-06", acctSAS{sv: "2020-12-06", srt: "o", sp: "r"}, getEntity, ""},
		{"version 2020-12-06 with scope", acctSAS{sv: "2020-12-06", srt: "o", sp: "r", ses: "scope1"}, getEntity, ""},
		{"https only", acctSAS{srt: "o", sp: "r", spr: "https"}, getEntity, "AuthorizationProtocolMismatch"},
		{"sip mismatch", acctSAS{srt: "o", sp: "r", sip: "192.0.2.1"}, getEntity, "AuthorizationSourceIPMismatch"},
		{"sip match", acctSAS{srt: "o", sp: "r", sip: "127.0.0.1"}, getEntity, ""},
		{"expired", acctSAS{srt: "o", sp: "r", se: sasTime(time.Now().Add(-time.Minute))}, getEntity, "AuthenticationFailed"},
		{"not yet valid", acctSAS{srt: "o", sp: "r", st: sasTime(time.Now().Add(time.Hour)), se: sasTime(time.Now().Add(2 * time.Hour))}, getEntity, "AuthenticationFailed"},
		{"wrong key", acctSAS{srt: "o", sp: "r", key: "d3Jvbmcga2V5"}, getEntity, "AuthenticationFailed"},
	}
	for _, tt := range tests {
		if tt.sas.se == "" {
			tt.sas.se = inAnHour()
		}
		q := tt.sas.encode()
		svc := e.sasServiceClient(q)
		c := e.sasTableClient(table, q)
		before := e.fullSnapshot()
		err := tt.op(svc, c)
		status, code := respStatus(t, err)
		switch {
		case tt.code == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.code != "" && (status != 403 || code != tt.code):
			t.Errorf("%s: got %d %s, want 403 %s", tt.name, status, code, tt.code)
		case tt.code != "" && e.fullSnapshot() != before:
			t.Errorf("%s: denied but changed the database", tt.name)
		}
	}
}

// TestAccountSASTampering checks that every signed field of an account
// SAS is covered by the signature, and the Go SDK's own account SAS, which
// demands HTTPS.
func TestAccountSASTampering(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner, table := e.newTable()
	sasAdd(t, owner, "p", "r")
	good := acctSAS{srt: "o", sp: "r", se: inAnHour(), spr: "https,http"}.encode()
	if _, err := e.sasTableClient(table, good).GetEntity(bg, "p", "r", nil); err != nil {
		t.Fatalf("untampered: %v", err)
	}
	for _, kv := range [][2]string{{"sp", "rwdlacup"}, {"srt", "sco"}, {"ss", "bt"}, {"se", sasTime(time.Now().Add(48 * time.Hour))},
		{"st", sasTime(time.Now().Add(-time.Hour))}, {"sip", "127.0.0.1"}, {"spr", "http,https"}, {"sv", "2018-03-28"}} {
		v, _ := url.ParseQuery(good)
		v.Set(kv[0], kv[1])
		_, err := e.sasTableClient(table, v.Encode()).GetEntity(bg, "p", "r", nil)
		wantRespErr(t, err, 403, "AuthenticationFailed")
	}

	// GetAccountSASURL always signs spr=https: over plain HTTP it is
	// refused, as on Azure and Azurite.
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	owned, err := aztables.NewServiceClientWithSharedKey(e.svcURL, cred, clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	sasURL, err := owned.GetAccountSASURL(aztables.AccountSASResourceTypes{Object: true}, aztables.AccountSASPermissions{Read: true},
		time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(sasURL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.sasTableClient(table, u.RawQuery).GetEntity(bg, "p", "r", nil)
	wantRespErr(t, err, 403, "AuthorizationProtocolMismatch")
}

// TestAccountSASBatch checks an account SAS against each operation of a
// batch.
func TestAccountSASBatch(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	owner, table := e.newTable()
	sasAdd(t, owner, "p", "old")
	add := func(rk string) aztables.TransactionAction {
		return aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: sasEntity("p", rk, 1)}
	}
	del := aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: sasEntity("p", "old", 0)}
	tests := []struct {
		name    string
		sas     acctSAS
		actions []aztables.TransactionAction
		code    string
	}{
		{"inserts with a", acctSAS{srt: "o", sp: "a"}, []aztables.TransactionAction{add("n1"), add("n2")}, ""},
		{"a delete without d", acctSAS{srt: "o", sp: "a"}, []aztables.TransactionAction{add("n3"), del}, "AuthorizationPermissionMismatch"},
		{"container only", acctSAS{srt: "c", sp: "rwdlacup"}, []aztables.TransactionAction{add("n4")}, "AuthorizationResourceTypeMismatch"},
		{"insert and delete", acctSAS{srt: "o", sp: "ad"}, []aztables.TransactionAction{add("n5"), del}, ""},
	}
	for _, tt := range tests {
		tt.sas.se = inAnHour()
		before := e.fullSnapshot()
		_, err := e.sasTableClient(table, tt.sas.encode()).SubmitTransaction(bg, tt.actions, nil)
		if tt.code == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.code) {
			t.Errorf("%s: got %v, want a failed batch with %s", tt.name, err, tt.code)
		}
		if e.fullSnapshot() != before {
			t.Errorf("%s: a rejected batch changed the database", tt.name)
		}
	}
	if got, want := strings.Join(listKeys(t, owner), ","), "p/n1,p/n2,p/n5"; got != want {
		t.Fatalf("after the batches: %s, want %s", got, want)
	}
}

// TestAccountSASFromSDK uses account SASes signed by the Go SDK's
// AccountSASSignatureValues.Sign (the way to sign one for a plain-HTTP
// endpoint, as GetAccountSASURL always demands https), end to end: each
// resource type allows what it covers and nothing else.
func TestAccountSASFromSDK(t *testing.T) {
	t.Parallel()
	needInProcess(t)
	e := newEnv(t)
	owner, table := e.newTable()
	sasAdd(t, owner, "p", "r")
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(rt aztables.AccountSASResourceTypes, perms aztables.AccountSASPermissions) string {
		t.Helper()
		p, err := aztables.AccountSASSignatureValues{Services: "t", ResourceTypes: rt.String(), Permissions: perms.String(),
			StartTime: time.Now().Add(-time.Minute), ExpiryTime: time.Now().Add(time.Hour)}.Sign(cred)
		if err != nil {
			t.Fatal(err)
		}
		return p.Encode()
	}

	objects := sign(aztables.AccountSASResourceTypes{Object: true}, aztables.AccountSASPermissions{Read: true, Add: true})
	c := e.sasTableClient(table, objects)
	if _, err := c.GetEntity(bg, "p", "r", nil); err != nil {
		t.Fatalf("read with an object SAS: %v", err)
	}
	if _, err := c.AddEntity(bg, sasEntity("p", "added", 1), nil); err != nil {
		t.Fatalf("insert with an object SAS holding a: %v", err)
	}
	before := e.fullSnapshot()
	_, err = c.DeleteEntity(bg, "p", "r", nil)
	wantRespErr(t, err, 403, "AuthorizationPermissionMismatch")
	_, err = e.sasServiceClient(objects).CreateTable(bg, "objectsasmade", nil)
	wantRespErr(t, err, 403, "AuthorizationResourceTypeMismatch")
	if e.fullSnapshot() != before {
		t.Fatal("a refused request changed the database")
	}

	containers := sign(aztables.AccountSASResourceTypes{Container: true}, aztables.AccountSASPermissions{List: true, Create: true, Delete: true})
	svc := e.sasServiceClient(containers)
	if names := listTableNames(t, svc); !slices.Contains(names, table) {
		t.Fatalf("a container SAS lists %v, want %s among them", names, table)
	}
	if _, err := svc.CreateTable(bg, "containersasmade", nil); err != nil {
		t.Fatalf("create with a container SAS: %v", err)
	}
	if _, err := svc.DeleteTable(bg, "containersasmade", nil); err != nil {
		t.Fatalf("delete with a container SAS: %v", err)
	}
	_, err = svc.NewClient(table).GetEntity(bg, "p", "r", nil)
	wantRespErr(t, err, 403, "AuthorizationResourceTypeMismatch")

	service := sign(aztables.AccountSASResourceTypes{Service: true}, aztables.AccountSASPermissions{Read: true})
	if _, err := e.sasServiceClient(service).GetProperties(bg, nil); err != nil {
		t.Fatalf("get service properties with a service SAS: %v", err)
	}
	_, err = e.sasServiceClient(service).SetProperties(bg, aztables.ServiceProperties{}, nil)
	wantRespErr(t, err, 403, "AuthorizationPermissionMismatch")
}
