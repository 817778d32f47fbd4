// Package testdb gives each test its own empty PostgreSQL schema on a real
// server, so that tests can run in parallel without seeing each other's data.
//
// The backend is PostgreSQL, or Citus when PGTABLES_TEST_BACKEND=citus: the
// same tests run on both. Its server is found once per test process, in
// this order. PostgreSQL: a container started with testcontainers when a
// Docker engine answers; the server named by PGTABLES_TEST_DATABASE_URL; the
// local server at postgres://postgres@127.0.0.1:5432/postgres. Citus: the
// coordinator named by PGTABLES_TEST_CITUS_URL (a cluster such as
// ../shared/citus/cluster.sh starts); else a single-node citusdata/citus
// container when a Docker engine answers.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strconv"
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

// CitusImage is the container image of the Citus backend without a
// cluster of its own: one node, which holds the shards itself.
const CitusImage = "citusdata/citus:12.1"

// testShards is the shard count of the entities of each test's schema on
// Citus: every test distributes its own, and a few shards a worker keep
// that quick while still spreading a table over every node.
const testShards = 4

// Citus reports whether the tests run on Citus (PGTABLES_TEST_BACKEND).
func Citus() bool { return os.Getenv("PGTABLES_TEST_BACKEND") == "citus" }

// Local reports whether the integration suite runs against a pgtables
// binary in local mode (PGTABLES_TEST_BACKEND=local): its database is the
// binary's own, which tests do not reach.
func Local() bool { return os.Getenv("PGTABLES_TEST_BACKEND") == "local" }

// NeedCitus skips a test of what only a Citus cluster has (shards, nodes,
// distribution) when the tests run on PostgreSQL. CI runs them on Citus.
func NeedCitus(tb testing.TB) {
	tb.Helper()
	if !Citus() {
		tb.Skip("needs Citus (PGTABLES_TEST_BACKEND=citus): PostgreSQL has no shards or nodes")
	}
}

func findServer() (string, error) {
	switch b := os.Getenv("PGTABLES_TEST_BACKEND"); b {
	case "", "postgres":
	case "citus":
		return findCitus()
	case "local":
		return "", fmt.Errorf("PGTABLES_TEST_BACKEND=local: the tests reach pgtables over HTTP only, not a database")
	default:
		return "", fmt.Errorf("PGTABLES_TEST_BACKEND=%q: want postgres, citus or local", b)
	}
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

func findCitus() (string, error) {
	if u := os.Getenv("PGTABLES_TEST_CITUS_URL"); u != "" {
		return u, nil
	}
	if !dockerAnswers() {
		return "", fmt.Errorf("PGTABLES_TEST_BACKEND=citus needs PGTABLES_TEST_CITUS_URL (a coordinator) or a Docker engine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := tcpostgres.Run(ctx, CitusImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return "", fmt.Errorf("start citus container: %w", err)
	}
	url, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return "", err
	}
	// One node: the coordinator holds the shards itself.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("citus container: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT citus_set_coordinator_host('localhost', 5432)`); err != nil {
		return "", fmt.Errorf("citus container: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT citus_set_node_property('localhost', 5432, 'shouldhaveshards', true)`); err != nil {
		return "", fmt.Errorf("citus container: %w", err)
	}
	return url, nil
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
	dsn := WithSearchPath(tb, base, schema)
	if Citus() {
		dsn = withParam(tb, dsn, "citus.shard_count", strconv.Itoa(testShards))
	}
	return dsn
}

// WithSearchPath returns rawURL with its search_path set to schema.
func WithSearchPath(tb testing.TB, rawURL, schema string) string {
	tb.Helper()
	return withParam(tb, rawURL, "search_path", schema)
}

// withParam returns rawURL with a run-time parameter set.
func withParam(tb testing.TB, rawURL, name, value string) string {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatalf("testdb: parse %s: %v", redact(rawURL), err)
	}
	q := u.Query()
	q.Set(name, value)
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
