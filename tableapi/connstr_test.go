package tableapi

import "testing"

func TestDial(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		conn               string
		endpoint, resource string // resource: what Shared Key Lite signs before a path
		sas                string
		bad                bool
	}{
		{conn: "UseDevelopmentStorage=true", endpoint: devEndpoint, resource: "/devstoreaccount1/devstoreaccount1"},
		{conn: "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net", endpoint: "https://acct.table.core.windows.net", resource: "/acct"},
		{conn: "AccountName=acct;AccountKey=a2V5", endpoint: "https://acct.table.core.windows.net", resource: "/acct"},
		{conn: "AccountName=acct;AccountKey=a2V5;TableEndpoint=http://127.0.0.1:10002/acct/;", endpoint: "http://127.0.0.1:10002/acct", resource: "/acct/acct"},
		{conn: "TableEndpoint=https://acct.table.core.windows.net;SharedAccessSignature=sv=2019-02-02&sig=abc%3D", endpoint: "https://acct.table.core.windows.net", sas: "sv=2019-02-02&sig=abc%3D"},
		{conn: "AccountName=acct", bad: true},
		{conn: "TableEndpoint=http://x", bad: true},
		{conn: "AccountName=acct;AccountKey=not base64!", bad: true},
		{conn: "nonsense", bad: true},
	} {
		c, err := Dial(tc.conn)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.conn)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.conn, err)
			continue
		}
		if c.endpoint != tc.endpoint || c.sas != tc.sas || tc.sas == "" && "/"+c.account+c.pathBase != tc.resource {
			t.Errorf("%q: endpoint %q, resource /%s%s, sas %q", tc.conn, c.endpoint, c.account, c.pathBase, c.sas)
		}
	}
}

// Account names the account of a key client, or the endpoint's for a SAS
// client: path-style or host-style.
func TestClientAccount(t *testing.T) {
	t.Parallel()
	for conn, want := range map[string]string{
		"UseDevelopmentStorage=true": "devstoreaccount1",
		"SharedAccessSignature=sv=2019-02-02&sig=x;TableEndpoint=http://127.0.0.1:10002/acct1":    "acct1",
		"SharedAccessSignature=sv=2019-02-02&sig=x;TableEndpoint=https://acct2.table.example.net": "acct2",
		"SharedAccessSignature=sv=2019-02-02&sig=x;AccountName=acct3":                             "acct3",
	} {
		c, err := Dial(conn)
		if err != nil {
			t.Fatalf("%s: %v", conn, err)
		}
		if got := c.Account(); got != want {
			t.Errorf("%s: account %q, want %q", conn, got, want)
		}
	}
}
