package main

import (
	"io"
	"testing"
)

func TestSSLModeSetByURLOrEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		vars map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"PGTABLES_DATABASE_URL": "postgres://u@127.0.0.1:5432/db"}, false},
		{map[string]string{"PGTABLES_DATABASE_URL": "postgresql://u@127.0.0.1/db?application_name=x"}, false},
		{map[string]string{"PGTABLES_DATABASE_URL": "postgres://u@127.0.0.1:5432/db?sslmode=prefer"}, true},
		{map[string]string{"PGTABLES_DATABASE_URL": "postgres://u@127.0.0.1/db?connect_timeout=5&sslmode=require"}, true},
		{map[string]string{"PGTABLES_DATABASE_URL": "host=127.0.0.1 dbname=db"}, false},
		{map[string]string{"PGTABLES_DATABASE_URL": "host=127.0.0.1 sslmode=verify-full"}, true},
		{map[string]string{"PGTABLES_DATABASE_URL": "sslmode = require host=127.0.0.1"}, true},
		{map[string]string{"PGTABLES_DATABASE_URL": "host=127.0.0.1 application_name=nosslmode=x"}, false},
		{map[string]string{"PGSSLMODE": "require"}, true},
		{map[string]string{"PGSSLMODE": "require", "PGTABLES_DATABASE_URL": "postgres://u@127.0.0.1/db"}, true},
	} {
		c, _, err := parseConfig("x", nil, env(tc.vars), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.sslModeSet != tc.want {
			t.Errorf("%v: sslmode set %v, want %v", tc.vars, c.sslModeSet, tc.want)
		}
	}
}
