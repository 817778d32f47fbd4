package store

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ways lists a config's ways of connecting, in order: host, and whether
// with TLS.
func ways(c *pgx.ConnConfig) []string {
	tlsOf := func(on bool) string {
		if on {
			return "+tls"
		}
		return ""
	}
	w := []string{c.Host + tlsOf(c.TLSConfig != nil)}
	for _, fb := range c.Fallbacks {
		w = append(w, fb.Host+tlsOf(fb.TLSConfig != nil))
	}
	return w
}

func TestPlainOnLoopbackKeepsTLSElsewhere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"postgres://u@127.0.0.1:5432/db", []string{"127.0.0.1"}},
		{"postgres://u@localhost:5432/db", []string{"localhost"}},
		{"postgres://u@[::1]:5432/db", []string{"::1"}},
		{"postgres://u@db.example.com:5432/db", []string{"db.example.com+tls", "db.example.com"}},
		{"postgres://u@10.1.2.3:5432/db", []string{"10.1.2.3+tls", "10.1.2.3"}},
		// Only TLS allowed: nothing to drop.
		{"postgres://u@127.0.0.1:5432/db?sslmode=require", []string{"127.0.0.1+tls"}},
		{"postgres://u@127.0.0.1:5432/db?sslmode=disable", []string{"127.0.0.1"}},
		{"postgres://u@127.0.0.1:5432,db.example.com:5432/db", []string{"127.0.0.1", "db.example.com+tls", "db.example.com"}},
		{"postgres://u@db.example.com:5432,127.0.0.1:5432/db", []string{"db.example.com+tls", "db.example.com", "127.0.0.1"}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			cfg, err := pgxpool.ParseConfig(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			PlainOnLoopback(cfg)
			// What a connection (or a Citus node's pool, a copy) gets.
			cc := cfg.Copy().ConnConfig.Copy()
			if err := cfg.BeforeConnect(context.Background(), cc); err != nil {
				t.Fatal(err)
			}
			got := ways(cc)
			if len(got) != len(tc.want) {
				t.Fatalf("ways %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("ways %q, want %q", got, tc.want)
				}
			}
		})
	}
}
