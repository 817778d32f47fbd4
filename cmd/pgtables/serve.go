package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgtables/pgtables/console"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/migrations"
	"github.com/pgtables/pgtables/store"
	"github.com/pgtables/pgtables/tokenauth"
)

// defaultConnectTimeout bounds opening a database connection when the
// connection string sets no connect_timeout: without it, connecting to an
// unreachable host would wait for the operating system's TCP timeout.
const defaultConnectTimeout = 5 * time.Second

func migrate(ctx context.Context, cfg *config, log *slog.Logger) (err error) {
	dbURL := cfg.databaseURL
	if cfg.local {
		local, lerr := startLocal(ctx, cfg, log)
		if lerr != nil {
			return lerr
		}
		defer func() {
			if serr := local.Stop(); err == nil {
				err = serr
			}
		}()
		dbURL = local.URL()
	}
	if err := migrations.UpWith(ctx, dbURL, migrationOptions(cfg)); err != nil {
		return err
	}
	v, _, err := migrations.Version(dbURL)
	if err != nil {
		return err
	}
	log.Info("migrations applied", "version", v)
	return nil
}

// serve runs the server until ctx ends, then shuts down: /-/ready turns
// 503 at once, new requests are still answered for cfg.shutdownDelay, then
// the listener closes and requests in flight get cfg.shutdownGrace to
// finish; then the background work stops and the pool closes. In local
// mode the private PostgreSQL starts first and stops last; should it exit
// on its own, the server shuts down and serve returns an error.
func serve(ctx context.Context, cfg *config, log *slog.Logger, accessJSON io.Writer) (err error) {
	accounts := httpapi.DevAccounts()
	if cfg.accounts != "" {
		var err error
		if accounts, err = httpapi.ParseAccounts(cfg.accounts); err != nil {
			return fmt.Errorf("accounts: %w", err)
		}
	}
	proxies, err := httpapi.ParseTrustedProxies(cfg.trustedProxies)
	if err != nil {
		return fmt.Errorf("trusted-proxies: %w", err)
	}
	bearer, err := bearerConfig(cfg)
	if err != nil {
		return err
	}
	if bearer != nil {
		if err := accounts.RefuseSharedKey(commaList(cfg.disallowSharedKey)); err != nil {
			return fmt.Errorf("disallow-shared-key: %w", err)
		}
		log.Info("bearer tokens accepted", "issuers", bearer.Verifier.Issuers(), "allow_http", bearer.AllowHTTP)
	}
	var tlsCfg *tls.Config
	if cfg.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	if cfg.requestTimeout > 0 && cfg.writeTimeout > 0 && cfg.writeTimeout <= cfg.requestTimeout {
		log.Warn("write-timeout does not exceed request-timeout: a request that times out may not get its 503 answer",
			"write_timeout", cfg.writeTimeout, "request_timeout", cfg.requestTimeout)
	}

	dbURL := cfg.databaseURL
	if cfg.local {
		local, lerr := startLocal(ctx, cfg, log)
		if lerr != nil {
			return lerr
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-local.Exited():
				if ctx.Err() == nil {
					log.Warn("the local PostgreSQL exited; shutting down")
					cancel()
				}
			case <-ctx.Done():
			}
		}()
		// Runs after the pool has closed (defers run last first).
		defer func() {
			cancel() // the watch above ends: what follows is no surprise
			select {
			case <-local.Exited():
				if err == nil {
					err = local.ExitErr()
				}
			default:
			}
			if serr := local.Stop(); err == nil {
				err = serr
			}
		}()
		dbURL = local.URL()
	}
	poolCfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	poolCfg.MaxConns = int32(cfg.dbMaxConns)
	if poolCfg.ConnConfig.ConnectTimeout == 0 {
		poolCfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	store.ConfigurePool(poolCfg)
	if !cfg.sslModeSet {
		store.PlainOnLoopback(poolCfg)
	}
	store.LimitAcquireWait(poolCfg, cfg.dbAcquireTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	opts := store.Options{Combine: cfg.dbCombine, FailoverWait: cfg.dbFailoverWait, MaxIndexes: cfg.maxIndexes, ChangeFeed: store.ChangeFeedConfig{
		Off: cfg.changeFeed == "off", OffOnCitus: cfg.changeFeed == "auto", OffAccounts: commaList(cfg.changeFeedOff), Retention: cfg.changeFeedRetention,
	}}
	if !cfg.citusRouting {
		opts.RouteConns = -1
	}
	st := store.NewWithOptions(pool, opts)
	defer st.Close()

	domains := commaList(cfg.serviceDomains)
	var migrated atomic.Bool
	var consoleHandler http.Handler
	if cfg.console {
		consoleHandler = console.Handler()
	}
	srv := httpapi.New(httpapi.Config{
		Accounts:              accounts,
		ServiceDomains:        domains,
		Version:               version,
		MaxBodyBytes:          int64(cfg.maxBodyBytes),
		TrustedProxies:        proxies,
		MaxConcurrentRequests: cfg.maxConcurrent,
		RequestTimeout:        cfg.requestTimeout,
		AccessLog:             cfg.accessLog,
		AccessLogJSON:         accessJSON,
		Console:               consoleHandler,
		Bearer:                bearer,
	}, st, log, func(ctx context.Context) error {
		if !migrated.Load() {
			return errors.New("database not migrated yet")
		}
		return ping(ctx, st)
	})

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	if cfg.pprofListen != "" {
		if err := servePprof(ctx, cfg.pprofListen, log); err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
	}
	// Requests run under a context of their own, cancelled only when the
	// grace period is over, so that shutting down does not cut them short.
	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: cfg.readHeaderTimeout,
		ReadTimeout:       cfg.readTimeout,
		WriteTimeout:      cfg.writeTimeout,
		IdleTimeout:       cfg.idleTimeout,
		MaxHeaderBytes:    cfg.maxHeaderBytes,
		TLSConfig:         tlsCfg,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
	}
	served := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			served <- hs.ServeTLS(ln, "", "")
		} else {
			served <- hs.Serve(ln)
		}
	}()
	log.Info("listening", "addr", ln.Addr().String(), "tls", tlsCfg != nil, "version", version, "accounts", len(accounts))
	logEndpoints(log, ln.Addr(), tlsCfg != nil, cfg.accounts == "", cfg.console)
	if cfg.accounts == "" {
		log.Warn("PGTABLES_ACCOUNTS is not set: serving only the development account devstoreaccount1 with its published key; do not expose this server")
	}

	// Migrations run once the database answers; until then /-/ready is 503
	// and protocol requests get a retryable ServerBusy. Then the purge of
	// deleted tables runs until shutdown.
	bg, cancelBG := context.WithCancel(ctx)
	defer cancelBG()
	var wg sync.WaitGroup
	wg.Go(func() {
		for delay := 250 * time.Millisecond; ; delay = min(2*delay, 10*time.Second) {
			err := migrations.UpWith(bg, dbURL, migrationOptions(cfg))
			if errors.Is(err, migrations.ErrSchemaNewer) {
				// A newer release migrated the database during a rolling
				// upgrade; its schema keeps serving older replicas.
				log.Warn("serving on a newer database schema", "err", err)
				err = nil
			}
			if err == nil {
				if err = st.DetectDistribution(bg); err == nil {
					break
				}
			}
			if bg.Err() != nil {
				return
			}
			log.Warn("database not ready, retrying", "err", err, "retry_in", delay)
			select {
			case <-bg.Done():
				return
			case <-time.After(delay):
			}
		}
		migrated.Store(true)
		srv.StartServing()
		log.Info("database migrated, serving", "distributed", st.Distributed())
		// The change feed's sequencer runs beside the purge, unless the
		// feed is off for every account; it ends with bg, and so do the
		// feed's long-polls and streams.
		var feed sync.WaitGroup
		if st.ChangeFeedAnywhere() {
			feed.Go(func() { st.RunChangeFeed(bg, store.ChangeFeedTiming{}, log) })
		}
		st.Purge(bg, purgeConfig(cfg), log)
		feed.Wait()
	})

	select {
	case err := <-served:
		cancelBG()
		wg.Wait()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	srv.Drain()
	log.Info("shutting down", "delay", cfg.shutdownDelay, "grace", cfg.shutdownGrace)
	if cfg.shutdownDelay > 0 {
		select {
		case <-time.After(cfg.shutdownDelay):
		case err := <-served:
			cancelBG()
			wg.Wait()
			return fmt.Errorf("serve: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("shutdown grace period over: cancelling the requests still in flight", "err", err)
		cancelRequests()
		_ = hs.Close()
	}
	cancelBG()
	wg.Wait()
	cancelRequests()
	st.Close() // index builds record their end while the pool is open
	pool.Close()
	log.Info("stopped")
	return nil
}

// commaList splits a comma-separated setting into its trimmed, non-empty
// elements.
func commaList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// bearerConfig is the configuration of bearer tokens; nil when no issuer
// is configured.
func bearerConfig(cfg *config) (*httpapi.BearerConfig, error) {
	issuers := commaList(cfg.oidcIssuers)
	if len(issuers) == 0 {
		return nil, nil
	}
	tc := tokenauth.Config{
		Issuers:      issuers,
		Audiences:    commaList(cfg.oidcAudiences),
		Leeway:       cfg.oidcLeeway,
		FetchTimeout: cfg.oidcFetchTimeout,
	}
	if cfg.oidcCAFile != "" {
		pemBytes, err := os.ReadFile(cfg.oidcCAFile)
		if err != nil {
			return nil, fmt.Errorf("oidc-ca-file: %w", err)
		}
		if tc.RootCAs, err = x509.SystemCertPool(); err != nil {
			tc.RootCAs = x509.NewCertPool()
		}
		if !tc.RootCAs.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("oidc-ca-file: no PEM certificate in %s", cfg.oidcCAFile)
		}
	}
	v, err := tokenauth.NewVerifier(tc)
	if err != nil {
		return nil, fmt.Errorf("oidc-issuers: %w", err)
	}
	rules, err := tokenauth.ParseRules(cfg.oidcGrants)
	if err != nil {
		return nil, fmt.Errorf("oidc-grants: %w", err)
	}
	m, err := tokenauth.NewMapper(rules)
	if err != nil {
		return nil, fmt.Errorf("oidc-grants: %w", err)
	}
	return &httpapi.BearerConfig{Verifier: v, Mapper: m, AllowHTTP: cfg.oidcAllowHTTP, AuthorizationURI: cfg.oidcAuthzURI}, nil
}

// ping is the readiness check of the database. A pool whose connections
// are all busy is taken for a working database: failing readiness under
// load would move the load onto the other replicas and make it worse.
func ping(ctx context.Context, st *store.Store) error {
	err := st.Ping(ctx)
	if err == nil {
		return nil
	}
	if s := st.Pool().Stat(); s.AcquiredConns() >= s.MaxConns() && errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// migrationOptions are the options of the migrations at start-up.
func migrationOptions(cfg *config) migrations.Options {
	return migrations.Options{CitusShardCount: cfg.citusShards}
}

// purgeConfig is the purge's configuration. Its grace period must outlast
// any write transaction, which the request timeout bounds: a write that
// found the table just before it was deleted must not commit its entity
// after the table's row is gone.
func purgeConfig(cfg *config) store.PurgeConfig {
	pc := store.DefaultPurgeConfig
	if cfg.requestTimeout > 0 {
		pc.Grace = max(pc.Grace, 2*cfg.requestTimeout)
	} else {
		pc.Grace = max(pc.Grace, 10*time.Minute)
	}
	return pc
}
