package tokenauth

import "testing"

func TestDiscoveryURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ issuer, want string }{
		{"https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0", "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0/.well-known/openid-configuration"},
		{"https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/", "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/.well-known/openid-configuration"},
		{"https://keycloak.example.com/realms/apps", "https://keycloak.example.com/realms/apps/.well-known/openid-configuration"},
		{"https://kubernetes.default.svc", "https://kubernetes.default.svc/.well-known/openid-configuration"},
	} {
		if got := discoveryURL(tc.issuer); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.issuer, got, tc.want)
		}
	}
}
