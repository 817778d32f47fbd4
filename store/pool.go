package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ConfigurePool sets what the store needs of the connections of a pool
// built from cfg. They leave the pool as soon as their server turns out to
// be read-only (see dropReadOnly). They note the warnings that announce a
// serialization failure. Citus reports a transaction that fails to serialize at COMMIT
// on a worker as an internal error (XX000), after a warning with the
// failure's SQLSTATE (40001): the store retries such a batch as it
// retries one that fails with 40001 itself (see commitConflict). A
// notice handler already there goes on receiving every notice.
func ConfigurePool(cfg *pgxpool.Config) {
	next := cfg.ConnConfig.OnNotice
	cfg.ConnConfig.OnNotice = func(c *pgconn.PgConn, n *pgconn.Notice) {
		if n.Code == pgerrcode.SerializationFailure {
			c.CustomData()[serializationWarning] = true
		}
		if next != nil {
			next(c, n)
		}
	}
	dropReadOnly(cfg)
}

// errReadOnly is the error of a connection to a server that takes no
// writes: a standby, a demoted primary, or a database or role with
// default_transaction_read_only. The store writes, so for it such a server
// is no database at all: the error counts as unavailable (503 ServerBusy).
var errReadOnly = errors.New("database server is read-only")

// dropReadOnly makes a pool built from cfg keep no connection to a
// read-only server, so that after a failover the pool connects again (to
// the new primary, with a multi-host URL and target_session_attrs=
// read-write) instead of handing out connections that fail every write:
//   - a new connection whose server reports itself read-only fails to
//     connect;
//   - a connection whose server has reported itself read-only since (a
//     reload of default_transaction_read_only) is not handed out again;
//   - a connection on which a write failed because the transaction was
//     read-only (25006) is closed at once.
//
// PostgreSQL 14 and later report default_transaction_read_only and
// in_hot_standby to the client whenever they change; with older servers
// the 25006 of the first write does the work.
func dropReadOnly(cfg *pgxpool.Config) {
	onErr := cfg.ConnConfig.OnPgError
	cfg.ConnConfig.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		keep := onErr == nil || onErr(c, e)
		return keep && e.Code != pgerrcode.ReadOnlySQLTransaction
	}
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if readOnly(c.PgConn()) {
			return fmt.Errorf("connect to %s: %w", c.PgConn().Conn().RemoteAddr(), errReadOnly)
		}
		if after != nil {
			return after(ctx, c)
		}
		return nil
	}
	// Checked as a connection leaves the pool rather than as it comes back:
	// pgxpool runs AfterRelease in a goroutine of its own on every release,
	// PrepareConn inline.
	prepare := cfg.PrepareConn
	cfg.PrepareConn = func(ctx context.Context, c *pgx.Conn) (bool, error) {
		if readOnly(c.PgConn()) {
			return false, nil
		}
		if prepare != nil {
			return prepare(ctx, c)
		}
		return true, nil
	}
}

// readOnly reports whether c's server has said that it takes no writes.
func readOnly(c *pgconn.PgConn) bool {
	return c.ParameterStatus("default_transaction_read_only") == "on" ||
		c.ParameterStatus("in_hot_standby") == "on"
}

// serializationWarning keys the note of ConfigurePool in a connection's
// CustomData.
const serializationWarning = "pgtables.serialization-warning"

// LimitAcquireWait bounds how long acquiring a connection from a pool
// built from cfg may wait, separately from the deadline of the statement
// that needs the connection. When every connection stays busy for longer,
// the statement fails with a deadline error, which the store reports as
// ErrUnavailable: the client gets a retryable 503 ServerBusy instead of
// queueing without bound. Connecting goes on in the background after the
// wait ends (bounded by the connection's connect_timeout), so a slow
// database still gets its connection for the next request.
//
// It installs a tracer on cfg.ConnConfig; a tracer already there keeps
// tracing queries.
func LimitAcquireWait(cfg *pgxpool.Config, wait time.Duration) {
	if wait <= 0 {
		return
	}
	cfg.ConnConfig.Tracer = &acquireLimiter{wait: wait, next: cfg.ConnConfig.Tracer}
}

// acquireLimiter is a pgxpool.AcquireTracer that puts a deadline on the
// context Acquire runs with; the pool uses that context only to acquire.
type acquireLimiter struct {
	wait time.Duration
	next pgx.QueryTracer
}

type acquireCancelKey struct{}

// TraceAcquireStart implements pgxpool.AcquireTracer.
func (l *acquireLimiter) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	ctx, cancel := context.WithTimeout(ctx, l.wait)
	return context.WithValue(ctx, acquireCancelKey{}, cancel)
}

// TraceAcquireEnd implements pgxpool.AcquireTracer.
func (l *acquireLimiter) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	if cancel, ok := ctx.Value(acquireCancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (l *acquireLimiter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if l.next != nil {
		return l.next.TraceQueryStart(ctx, conn, data)
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (l *acquireLimiter) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	if l.next != nil {
		l.next.TraceQueryEnd(ctx, conn, data)
	}
}

// PlainOnLoopback makes the connections of a pool built from cfg, and of
// the pools of Citus nodes made from it, skip TLS to a database on this
// machine (a loopback address, localhost): there encryption protects
// nothing and costs CPU on both sides of every round trip. Call it only
// when the connection string and the environment leave sslmode unset:
// pgx's default, sslmode=prefer, tries TLS first and falls back to plain,
// so plain is one of the ways prefer allows. Other hosts keep TLS.
func PlainOnLoopback(cfg *pgxpool.Config) {
	next := cfg.BeforeConnect
	cfg.BeforeConnect = func(ctx context.Context, c *pgx.ConnConfig) error {
		if next != nil {
			if err := next(ctx, c); err != nil {
				return err
			}
		}
		dropLoopbackTLS(&c.Config)
		return nil
	}
}

// dropLoopbackTLS removes the TLS attempts to loopback hosts from c's
// ways of connecting, where a plain way to the same host remains.
func dropLoopbackTLS(c *pgconn.Config) {
	type way struct {
		host string
		port uint16
	}
	plain := map[way]bool{}
	if c.TLSConfig == nil {
		plain[way{c.Host, c.Port}] = true
	}
	for _, fb := range c.Fallbacks {
		if fb.TLSConfig == nil {
			plain[way{fb.Host, fb.Port}] = true
		}
	}
	drop := func(host string, port uint16, withTLS bool) bool {
		return withTLS && isLoopbackHost(host) && plain[way{host, port}]
	}
	var kept []*pgconn.FallbackConfig
	for _, fb := range c.Fallbacks {
		if !drop(fb.Host, fb.Port, fb.TLSConfig != nil) {
			kept = append(kept, fb)
		}
	}
	if drop(c.Host, c.Port, c.TLSConfig != nil) && len(kept) > 0 {
		// The first remaining way becomes the primary one.
		c.Host, c.Port, c.TLSConfig = kept[0].Host, kept[0].Port, kept[0].TLSConfig
		kept = kept[1:]
	}
	c.Fallbacks = kept
}

// isLoopbackHost reports a host name or address of this machine's
// loopback interface (a Unix socket never uses TLS).
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
