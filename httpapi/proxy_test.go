package httpapi

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	got, err := ParseTrustedProxies(" 10.0.0.0/8, 192.168.1.7,fd00::/8,::ffff:172.16.0.0/108 ,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.168.1.7/32", "fd00::/8", "172.16.0.0/12"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("prefix %d = %s, want %s", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "1.2.3"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if p, err := ParseTrustedProxies(""); err != nil || len(p) != 0 {
		t.Errorf("empty list: %v %v", p, err)
	}
}

func TestResolveOrigin(t *testing.T) {
	t.Parallel()
	trusted, err := ParseTrustedProxies("10.0.0.0/8, ::1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		remote  string
		tls     bool
		headers map[string][]string
		trusted []netip.Prefix
		ip      string // "" : unknown
		https   bool
		host    string
	}{
		{name: "direct", remote: "203.0.113.5:4000", ip: "203.0.113.5"},
		{name: "direct tls", remote: "203.0.113.5:4000", tls: true, ip: "203.0.113.5", https: true},
		{name: "forwarding headers from an untrusted peer are ignored", remote: "203.0.113.5:4000",
			headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"evil.example"}},
			ip:      "203.0.113.5"},
		{name: "nothing is trusted without a list", remote: "10.1.2.3:4000", trusted: []netip.Prefix{},
			headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "X-Forwarded-Proto": {"https"}},
			ip:      "10.1.2.3"},
		{name: "trusted proxy", remote: "10.1.2.3:4000",
			headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"acct.table.example.com"}},
			ip:      "198.51.100.1", https: true, host: "acct.table.example.com"},
		{name: "a spoofed first hop is not believed", remote: "10.1.2.3:4000",
			headers: map[string][]string{"X-Forwarded-For": {"1.1.1.1, 198.51.100.1"}},
			ip:      "198.51.100.1"},
		{name: "chain of trusted proxies", remote: "10.1.2.3:4000",
			headers: map[string][]string{"X-Forwarded-For": {"198.51.100.1, 10.9.9.9", "10.8.8.8"}},
			ip:      "198.51.100.1"},
		{name: "all hops trusted: the leftmost", remote: "10.1.2.3:4000",
			headers: map[string][]string{"X-Forwarded-For": {"10.7.7.7, 10.9.9.9"}},
			ip:      "10.7.7.7"},
		{name: "ipv6 loopback proxy, hop with port", remote: "[::1]:4000",
			headers: map[string][]string{"X-Forwarded-For": {"[2001:db8::1]:5555"}},
			ip:      "2001:db8::1"},
		{name: "garbage hop makes the client unknown", remote: "10.1.2.3:4000",
			headers: map[string][]string{"X-Forwarded-For": {"unknown"}},
			ip:      ""},
		{name: "last proto wins", remote: "10.1.2.3:4000", tls: true,
			headers: map[string][]string{"X-Forwarded-Proto": {"https, http"}},
			ip:      "10.1.2.3", https: false},
		{name: "bad forwarded host is ignored", remote: "10.1.2.3:4000",
			headers: map[string][]string{"X-Forwarded-Host": {"a.example/evil"}},
			ip:      "10.1.2.3"},
		{name: "mapped ipv4 peer", remote: "[::ffff:10.1.2.3]:4000",
			headers: map[string][]string{"X-Forwarded-For": {"198.51.100.9"}},
			ip:      "198.51.100.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/devstoreaccount1/Tables", nil)
			r.RemoteAddr = tc.remote
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, vs := range tc.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			tr := trusted
			if tc.trusted != nil {
				tr = tc.trusted
			}
			r2, _ := withOrigin(r.Context(), r, tr)
			o := requestOrigin(r2)
			gotIP := ""
			if o.ip.IsValid() {
				gotIP = o.ip.String()
			}
			if gotIP != tc.ip || o.https != tc.https {
				t.Errorf("origin = %q https=%v, want %q https=%v", gotIP, o.https, tc.ip, tc.https)
			}
			wantHost := tc.host
			if wantHost == "" {
				wantHost = r.Host
			}
			if r2.Host != wantHost {
				t.Errorf("host = %q, want %q", r2.Host, wantHost)
			}
		})
	}
}
