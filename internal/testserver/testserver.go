// Package testserver serves pgtables in the test's own process, as the
// command does (a pool configured by the store, the HTTP server on a
// loopback port), for the tests of every package that need a server and
// its store side by side.
package testserver

import (
	"context"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/migrations"
	"github.com/pgtables/pgtables/store"
)

// Config tunes a server; zero fields take the defaults given.
type Config struct {
	MaxConns       int32          // pool size; 0: 16
	AppName        string         // application_name of the server's connections
	ConnectTimeout time.Duration  // of each connection; 0: the URL's
	AcquireWait    time.Duration  // store.LimitAcquireWait; 0: unbounded
	Store          store.Options  // the store's options
	HTTP           httpapi.Config // the server's configuration; Version "" is "test"
	// Log receives the server's log; nil: its warnings and errors go to
	// stderr when PGTABLES_TEST_LOG is set, else nowhere.
	Log *slog.Logger
	// TLS serves HTTPS with a certificate of its own, which Client and
	// CertPEM give.
	TLS bool
	// ChangeFeed runs the change feed's sequencer and notifications
	// (store.RunChangeFeed) as the server does; without them, feed reads
	// sequence on demand and waiting ones notice changes by polling.
	ChangeFeed bool
}

// Server is pgtables serving in the test's process.
type Server struct {
	URL     string       // http(s)://127.0.0.1:port, without an account
	Client  *http.Client // trusts the server's certificate (TLS)
	CertPEM []byte       // the server's certificate (TLS)
	Pool    *pgxpool.Pool
	Store   *store.Store
	HTTP    *httpapi.Server
	stop    func()
}

// Stop closes the server, the store and the pool; it is also done when the
// test ends.
func (s *Server) Stop() { s.stop() }

// Database returns the connection string of a new, migrated test database
// (internal/testdb).
func Database(tb testing.TB) string {
	tb.Helper()
	dsn := testdb.New(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := migrations.Up(ctx, dsn); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	return dsn
}

// Start serves pgtables on the migrated database dsn.
func Start(tb testing.TB, dsn string, cfg Config) *Server {
	tb.Helper()
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	pcfg.MaxConns = 16
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	if cfg.AppName != "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = cfg.AppName
	}
	if cfg.ConnectTimeout > 0 {
		pcfg.ConnConfig.ConnectTimeout = cfg.ConnectTimeout
	}
	store.ConfigurePool(pcfg)
	store.LimitAcquireWait(pcfg, cfg.AcquireWait)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		tb.Fatal(err)
	}
	st := store.NewWithOptions(pool, cfg.Store)
	// With a short acquire wait the pool's first connection may outlast
	// it on a busy machine (a cluster's coordinator, say); the pool goes
	// on dialling after the wait gives up, so try a few times.
	for try := 1; ; try++ {
		err := st.DetectDistribution(ctx)
		if err == nil {
			break
		}
		if try == 10 {
			st.Close()
			pool.Close()
			tb.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	log := cfg.Log
	if log == nil {
		var to io.Writer = io.Discard
		if os.Getenv("PGTABLES_TEST_LOG") != "" {
			to = os.Stderr
		}
		log = slog.New(slog.NewTextHandler(to, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	hc := cfg.HTTP
	if hc.Version == "" {
		hc.Version = "test"
	}
	srv := httpapi.New(hc, st, log, st.Ping)
	srv.StartServing()
	s := &Server{Pool: pool, Store: st, HTTP: srv, Client: http.DefaultClient}
	var closeServer func()
	if cfg.TLS {
		hts := httptest.NewUnstartedServer(srv)
		hts.Config.ReadHeaderTimeout = 10 * time.Second
		hts.StartTLS()
		s.URL, s.Client, closeServer = hts.URL, hts.Client(), hts.Close
		s.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hts.Certificate().Raw})
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		s.URL, closeServer = "http://"+ln.Addr().String(), func() { _ = hs.Close() }
	}
	feedCtx, stopFeed := context.WithCancel(context.Background())
	var feed sync.WaitGroup
	if cfg.ChangeFeed {
		feed.Go(func() { st.RunChangeFeed(feedCtx, store.ChangeFeedTiming{}, log) })
	}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			stopFeed()
			feed.Wait()
			closeServer()
			st.Close() // index builds record their end while the pool is open
			pool.Close()
		})
	}
	tb.Cleanup(s.stop)
	return s
}
