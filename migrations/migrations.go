// Package migrations holds the database schema as golang-migrate SQL files,
// embedded in the binary so that `pgtables migrate` and the start-up of the
// server need nothing but a database URL.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed *.sql
var files embed.FS

// ErrSchemaNewer reports a database migrated by a newer release than this
// binary: during a rolling upgrade, older replicas keep serving on the newer
// schema, whose migrations keep older releases working.
var ErrSchemaNewer = errors.New("database schema is newer than this binary")

// Options tunes what migrations create.
type Options struct {
	// CitusShardCount is the number of shards of the entities relation
	// where migration 0003 distributes it (Citus); 0 leaves it to the
	// server's citus.shard_count where its configuration sets one, and
	// otherwise takes 4 per worker, at least 8. It has no effect once
	// entities are distributed: rebalance or alter_distributed_table then.
	CitusShardCount int
}

// Up applies every migration not yet applied to the database at databaseURL.
// It is safe to call from several processes at once: golang-migrate holds an
// advisory lock while it works. When ctx ends, Up asks the migration to
// stop after its current step and returns within a few seconds even if the
// database does not answer.
func Up(ctx context.Context, databaseURL string) error {
	return UpWith(ctx, databaseURL, Options{})
}

// UpWith is Up with options.
func UpWith(ctx context.Context, databaseURL string, opts Options) error {
	done := make(chan error, 1)
	stop := make(chan chan bool, 1)
	go func() {
		cfg, err := connConfig(databaseURL, opts)
		if err != nil {
			done <- err
			return
		}
		m, err := open(cfg)
		if err != nil {
			done <- err
			return
		}
		defer m.Close()
		if err := checkNotNewer(m); err != nil {
			done <- err
			return
		}
		stop <- m.GracefulStop
		if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			done <- err
			return
		}
		done <- distribute(ctx, cfg)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		select {
		case graceful := <-stop:
			graceful <- true
		default:
		}
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
		}
		if err == nil || errors.Is(err, migrate.ErrNoChange) {
			err = ctx.Err()
		}
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

func checkNotNewer(m *migrate.Migrate) error {
	v, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return nil
	}
	if err != nil {
		return err
	}
	latest, err := Latest()
	if err != nil {
		return err
	}
	if v > latest && !dirty {
		return fmt.Errorf("%w: the database is at version %d, this binary knows up to %d", ErrSchemaNewer, v, latest)
	}
	return nil
}

// Version reports the schema version of the database and whether a failed
// migration left it dirty. An empty database is at version 0.
func Version(databaseURL string) (version uint, dirty bool, err error) {
	cfg, err := connConfig(databaseURL, Options{})
	if err != nil {
		return 0, false, err
	}
	m, err := open(cfg)
	if err != nil {
		return 0, false, err
	}
	defer m.Close()
	version, dirty, err = m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	return version, dirty, err
}

// Latest is the version of the newest migration in this binary.
func Latest() (uint, error) {
	src, err := iofs.New(files, ".")
	if err != nil {
		return 0, fmt.Errorf("open embedded migrations: %w", err)
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, fmt.Errorf("first migration: %w", err)
	}
	for {
		next, err := src.Next(v)
		if err != nil {
			return v, nil
		}
		v = next
	}
}

// connConfig is the configuration of the connections that migrate.
func connConfig(databaseURL string, opts Options) (*pgx.ConnConfig, error) {
	// Parsing with pgx accepts every form pgtables accepts elsewhere: URLs,
	// key=value strings, and an empty string meaning the libpq environment.
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		// golang-migrate connects without a deadline; a database that
		// accepts connections but never answers must not hang us.
		cfg.ConnectTimeout = 5 * time.Second
	}
	if opts.CitusShardCount > 0 {
		// A setting of the session, which create_distributed_table reads;
		// without Citus, a placeholder that nothing reads.
		cfg.RuntimeParams["citus.shard_count"] = strconv.Itoa(opts.CitusShardCount)
	}
	return cfg, nil
}

func open(cfg *pgx.ConnConfig) (*migrate.Migrate, error) {
	src, err := iofs.New(files, ".")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	driver, err := migratepgx.WithInstance(db, &migratepgx.Config{})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect for migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		driver.Close()
		return nil, fmt.Errorf("init migrations: %w", err)
	}
	return m, nil
}
