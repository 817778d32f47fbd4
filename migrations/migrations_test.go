package migrations_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/migrations"
)

func TestUpIsIdempotent(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := migrations.Up(ctx, dsn); err != nil {
			t.Fatalf("up #%d: %v", i+1, err)
		}
	}
	v, dirty, err := migrations.Version(dsn)
	if err != nil {
		t.Fatal(err)
	}
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if v != latest || dirty {
		t.Fatalf("version %d dirty=%v, want %d clean", v, dirty, latest)
	}
}

// A binary never downgrades a database a newer release migrated; it says so.
func TestUpRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t)
	ctx := context.Background()
	if err := migrations.Up(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE schema_migrations SET version = version + 1"); err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, dsn); !errors.Is(err, migrations.ErrSchemaNewer) {
		t.Fatalf("Up on a newer schema: %v", err)
	}
}

// Up gives up when its context ends, even against a server that accepts
// connections and never answers.
func TestUpStopsWithContext(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = migrations.Up(ctx, "postgres://postgres@"+ln.Addr().String()+"/x?sslmode=disable&connect_timeout=60")
	if err == nil {
		t.Fatal("Up succeeded against a silent server")
	}
	if waited := time.Since(start); waited > 20*time.Second {
		t.Fatalf("Up took %s to give up", waited)
	}
}
