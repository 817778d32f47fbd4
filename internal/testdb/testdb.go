// Package testdb gives each test its own empty PostgreSQL schema on a real
// server, so that tests can run in parallel without seeing each other's data.
//
// The server is found once per test process, in this order: a PostgreSQL
// container started with testcontainers when a Docker engine answers; the
// server named by PGTABLES_TEST_DATABASE_URL; the local server at
// postgres://postgres@127.0.0.1:5432/postgres.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// DefaultURL is the database used when neither Docker nor
// PGTABLES_TEST_DATABASE_URL is available.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// ServerURL returns the connection string of the server tests use.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	serverOnce.Do(func() { serverURL, serverErr = findServer() })
	if serverErr != nil {
		tb.Fatalf("testdb: %v", serverErr)
	}
	return serverURL
}

func findServer() (string, error) {
	if dockerAnswers() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c, err := tcpostgres.Run(ctx, "postgres:15-alpine",
			tcpostgres.WithDatabase("pgtables"),
			tcpostgres.WithUsername("postgres"),
			tcpostgres.WithPassword("postgres"),
			tcpostgres.BasicWaitStrategies(),
		)
		if err != nil {
			return "", fmt.Errorf("start postgres container: %w", err)
		}
		return c.ConnectionString(ctx, "sslmode=disable")
	}
	if u := os.Getenv("PGTABLES_TEST_DATABASE_URL"); u != "" {
		return u, nil
	}
	return DefaultURL, nil
}

// dockerAnswers reports whether a Docker engine responds. testcontainers
// panics in some setups without one, hence the recover.
func dockerAnswers() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Health(ctx) == nil
}

// New creates an empty schema for the test, drops it when the test ends,
// and returns a connection string whose search_path selects it.
func New(tb testing.TB) string {
	tb.Helper()
	base := ServerURL(tb)
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	schema := "test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("testdb: connect %s: %v", redact(base), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("testdb: create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Logf("testdb: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Logf("testdb: drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(tb, base, schema)
}

// WithSearchPath returns rawURL with its search_path set to schema.
func WithSearchPath(tb testing.TB, rawURL, schema string) string {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatalf("testdb: parse %s: %v", redact(rawURL), err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
