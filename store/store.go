package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/odata"
)

// Errors the store reports; httpapi maps each to one Azure error code.
var (
	ErrTableNotFound   = errors.New("table not found")
	ErrTableExists     = errors.New("table already exists")
	ErrEntityNotFound  = errors.New("entity not found")
	ErrEntityExists    = errors.New("entity already exists")
	ErrConditionNotMet = errors.New("update condition not satisfied")
	// ErrUnavailable means the database could not be reached or shed the
	// work; the request may be retried. It had no effect, except for a
	// write whose connection was lost during its COMMIT, which may have
	// committed (as after a primary's crash): retried, such a write is
	// idempotent or meets its own earlier effect (409, 412).
	ErrUnavailable = errors.New("database unavailable")
)

// Store runs table and entity operations against PostgreSQL.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	opts Options
	// Point reads and single-entity writes share round trips under load
	// (see combiner).
	reads, writes *combiner
	obs           atomic.Pointer[observerRef] // see SetObserver
	distributed   atomic.Bool                 // see DetectDistribution
	router        atomic.Pointer[router]      // see route.go
	coordLive     atomic.Pointer[string]      // the coordinator's table guard (router.loadGuards)
	purge         purgeState                  // see Purge
	tableIDs      tableIDs                    // see writeByID
	builds        buildState                  // see CreateIndex
	changeSQL     sync.Map                    // statements with their change recorded (changes.go)
	feedOff       map[string]bool             // accounts whose change feed is off
	feed          *feedHub                    // wakes change feed readers (changes_sequence.go)
	indexCache    indexCache                  // see indexes_cache.go
}

// Options tunes a Store; zero fields take the defaults.
type Options struct {
	// ScanBudget bounds the time one query page spends scanning for
	// matches of a filter that the key index cannot narrow down; then the
	// page ends early with a continuation, as Azure's 5 s limit does.
	ScanBudget time.Duration
	// ScanChunk is how many rows one statement of such a scan reads.
	ScanChunk int
	// ScanFirst is the part of ScanBudget that a query's single statement
	// may take before a chunked scan takes over (default: half).
	ScanFirst time.Duration
	// Combine is how many round trips of point reads, and how many of
	// single-entity writes, may be in flight at once before further ones
	// share round trips (default: a sixteenth of the pool, at least one).
	// Fewer round trips in flight make bigger shared ones: fewer commits
	// and wakeups of the database per request, which is what bounds
	// throughput when the database's cores are few.
	Combine int
	// FailoverWait bounds how long a request waits for a writable
	// primary when there is none, as during a failover (see outlast):
	// reads, and writes that certainly had no effect, are tried again
	// meanwhile. Zero (the default): no waiting, the request fails at
	// once, as it must when the database is down for longer.
	FailoverWait time.Duration
	// RouteConns is the size of the pool of each Citus node that
	// statements of one partition are sent to (route.go); default
	// RouteConns(the pool's size). Negative: every statement goes to the
	// coordinator.
	RouteConns int
	// MaxIndexes is how many property indexes one table may have
	// (default DefaultMaxIndexes): each costs every write of the table.
	MaxIndexes int
	// ChangeFeed configures the change feed (changes.go).
	ChangeFeed ChangeFeedConfig
	// IndexCacheTTL is how long a table's ready property indexes are
	// known without reading the catalog again (default
	// DefaultIndexCacheTTL): how soon a query uses an index that another
	// server built, or stops naming one it dropped. Negative: read them
	// for every page.
	IndexCacheTTL time.Duration
}

// Defaults for Options.
const (
	DefaultScanBudget = 5 * time.Second
	DefaultScanChunk  = 5000
)

// DefaultCombine is Options.Combine's default for a pool of conns
// connections. On a 2-core machine one round trip of each kind in flight
// took 10–20% less CPU per request than two, across every single-entity
// scenario of pgtables-bench; a pool sized to the database's cores, as the
// README advises, scales it with them.
func DefaultCombine(conns int) int { return max(1, conns/16) }

// New returns a Store on pool with default options. The schema must be
// migrated.
func New(pool *pgxpool.Pool) *Store { return NewWithOptions(pool, Options{}) }

// NewWithOptions returns a Store on pool.
func NewWithOptions(pool *pgxpool.Pool, opts Options) *Store {
	if opts.ScanBudget <= 0 {
		opts.ScanBudget = DefaultScanBudget
	}
	if opts.ScanChunk <= 0 {
		opts.ScanChunk = DefaultScanChunk
	}
	if opts.ScanFirst <= 0 || opts.ScanFirst > opts.ScanBudget {
		opts.ScanFirst = opts.ScanBudget / 2
	}
	if opts.MaxIndexes <= 0 {
		opts.MaxIndexes = DefaultMaxIndexes
	}
	if opts.IndexCacheTTL == 0 {
		opts.IndexCacheTTL = DefaultIndexCacheTTL
	}
	conns := int(pool.Config().MaxConns)
	if opts.Combine <= 0 {
		opts.Combine = DefaultCombine(conns)
	}
	if opts.ChangeFeed.Retention <= 0 {
		opts.ChangeFeed.Retention = DefaultChangeRetention
	}
	s := &Store{pool: pool, now: time.Now, opts: opts, feed: newFeedHub()}
	s.feedOff = make(map[string]bool, len(opts.ChangeFeed.OffAccounts))
	for _, a := range opts.ChangeFeed.OffAccounts {
		s.feedOff[a] = true
	}
	s.reads = newCombiner(s, opts.Combine, conns/2)
	s.writes = newCombiner(s, opts.Combine, conns/2)
	s.reads.live, s.writes.live = &s.coordLive, &s.coordLive
	return s
}

// Pool returns the connection pool, for health checks and metrics.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that the database answers and takes writes: a read-only
// server (a standby, a demoted primary) is no primary for the store, and
// the connection to it leaves the pool.
func (s *Store) Ping(ctx context.Context) error {
	err := s.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		if err := c.Ping(ctx); err != nil {
			return err
		}
		if readOnly(c.Conn().PgConn()) {
			return errReadOnly
		}
		return nil
	})
	if err != nil {
		return classify(fmt.Errorf("ping: %w", err))
	}
	return nil
}

func (s *Store) ticks() int64 { return odata.Ticks(s.now()) }

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// classify marks errors that mean "the database is not there right now" as
// ErrUnavailable, so that clients get a retryable 503 instead of a 500.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

func unavailable(err error) bool {
	// Not getting a connection at all means the database is not there for
	// us, whatever the server said when it refused (authentication, too
	// many connections, starting up).
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, errReadOnly) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgerrcode.IsConnectionException(pgErr.Code),
			pgerrcode.IsInsufficientResources(pgErr.Code),
			pgErr.Code == pgerrcode.AdminShutdown,
			pgErr.Code == pgerrcode.CrashShutdown,
			pgErr.Code == pgerrcode.CannotConnectNow,
			// A write reached a server that is read-only: a standby or
			// a primary being demoted. The write did not happen; after
			// the failover the new primary takes it.
			pgErr.Code == pgerrcode.ReadOnlySQLTransaction,
			pgErr.Code == pgerrcode.QueryCanceled,
			pgErr.Code == pgerrcode.LockNotAvailable:
			return true
		}
		return false
	}
	// Errors without a SQLSTATE come from the connection itself: refused,
	// reset, closed under us, or timed out.
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		// The request's context ended: the client went away or the server
		// is shutting down. The work did not finish; it may be retried.
		errors.Is(err, context.Canceled)
}

// maxTxAttempts bounds how often inConflictRetry runs a transaction.
const maxTxAttempts = 8

// inConflictRetry runs fn in a transaction and runs it again, after a short
// random pause, while it fails on a serialization failure or a deadlock.
// Short metadata transactions need it on Citus: an index build (CREATE
// INDEX CONCURRENTLY) waits on every node for the transactions older than
// itself, and Citus's distributed deadlock detector counts those waits, so
// a transaction that locks the table's row while a build runs can be
// cancelled as part of a "deadlock" that running it again resolves.
func (s *Store) inConflictRetry(ctx context.Context, fn func(pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < maxTxAttempts; attempt++ {
		if attempt > 0 {
			backoff := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt+2, 8)))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
		}
		if err = pgx.BeginFunc(ctx, s.pool, fn); !retryable(err) {
			return err
		}
	}
	return err
}

// retryable reports a transaction conflict that is worth running again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == pgerrcode.SerializationFailure || pgErr.Code == pgerrcode.DeadlockDetected
	}
	return false
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation
}
