package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pgtables/pgtables/localpg"
)

// config is the whole configuration of the process.
type config struct {
	databaseURL string
	// sslModeSet: the connection string or PGSSLMODE chooses sslmode;
	// otherwise a database on loopback is reached without TLS.
	sslModeSet     bool
	listen         string
	accounts       string
	serviceDomains string
	logLevel       string
	logFormat      string
	accessLog      bool
	dbMaxConns     int
	dbCombine      int // 0: store.DefaultCombine
	maxIndexes     int
	// The change feed (docs/changefeed.md): on or off for every account,
	// the accounts with it off, and how long changes are kept.
	changeFeed          string
	changeFeedOff       string
	changeFeedRetention time.Duration
	citusRouting        bool
	citusShards         int // 0: see migrations.Options
	// dbAcquireTimeout bounds the wait for a free database connection;
	// then the request gets 503 ServerBusy with Retry-After.
	dbAcquireTimeout time.Duration
	// dbFailoverWait is how long a request waits for a writable primary
	// when there is none (store.Options.FailoverWait).
	dbFailoverWait time.Duration
	shutdownGrace  time.Duration
	// shutdownDelay is how long the server keeps serving after SIGTERM
	// with /-/ready at 503, so that load balancers notice first.
	shutdownDelay     time.Duration
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	requestTimeout    time.Duration
	maxHeaderBytes    int
	maxBodyBytes      int
	maxConcurrent     int // 0: no limit
	tlsCert, tlsKey   string
	trustedProxies    string
	pprofListen       string // "": no profiling endpoint
	console           bool   // serve the web console at /-/console/

	// Bearer tokens (OpenID Connect); off while oidcIssuers is empty.
	oidcIssuers      string // comma-separated issuer URLs
	oidcAudiences    string // comma-separated
	oidcGrants       string // JSON array of grant rules, or a file holding one
	oidcCAFile       string // PEM roots for fetching issuers' keys, besides the system's
	oidcFetchTimeout time.Duration
	oidcLeeway       time.Duration
	oidcAllowHTTP    bool
	oidcAuthzURI     string // the 401 challenge's authorization_uri; "": from the first issuer
	// disallowSharedKey names accounts that take bearer tokens only.
	disallowSharedKey string

	// Local mode: with no database configured, a private PostgreSQL.
	local         bool   // no PGTABLES_DATABASE_URL and no libpq environment
	dataDir       string // its data directory
	ephemeral     bool   // a throwaway one in a temporary directory instead
	localPGBin    string // "": search
	localPGSearch string // further places to search, after PATH
	path          string // PATH, searched for pg_config and initdb
}

// libpqEnv are the libpq environment variables that name a database: with
// any of them set, pgtables connects where they say rather than running a
// PostgreSQL of its own.
var libpqEnv = []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"}

// parseConfig reads the configuration: every setting is an environment
// variable with a flag twin, and the flag wins when both are given. It
// returns the arguments left after the flags.
func parseConfig(name string, args []string, getenv func(string) string, stderr io.Writer) (*config, []string, error) {
	c := &config{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	envErrs := map[string]error{} // by flag name
	// envOr returns the environment's value for env, or def.
	envOr := func(env, def string) string {
		if v := getenv(env); v != "" {
			return v
		}
		return def
	}
	str := func(p *string, flagName, env, def, usage string) {
		fs.StringVar(p, flagName, envOr(env, def), usage+" ($"+env+")")
	}
	integer := func(p *int, flagName, env, def string, lo int, usage string) {
		v, err := strconv.Atoi(envOr(env, def))
		if err != nil || v < lo {
			envErrs[flagName] = fmt.Errorf("%s: %q is not a whole number of at least %d", env, envOr(env, def), lo)
		}
		fs.Func(flagName, usage+" ($"+env+", default "+def+")", func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < lo {
				return fmt.Errorf("%q is not a whole number of at least %d", s, lo)
			}
			*p = n
			return nil
		})
		*p = v
	}
	duration := func(p *time.Duration, flagName, env, def, usage string) {
		v, err := time.ParseDuration(envOr(env, def))
		if err != nil || v < 0 {
			envErrs[flagName] = fmt.Errorf("%s: %q is not a duration such as 1.5s or 2m", env, envOr(env, def))
		}
		fs.Func(flagName, usage+" ($"+env+", default "+def+")", func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return fmt.Errorf("%q is not a duration such as 1.5s or 2m", s)
			}
			*p = d
			return nil
		})
		*p = v
	}
	boolean := func(p *bool, flagName, env, def, usage string) {
		v, err := strconv.ParseBool(envOr(env, def))
		if err != nil {
			envErrs[flagName] = fmt.Errorf("%s: %q is not true or false", env, envOr(env, def))
		}
		fs.BoolVar(p, flagName, v, usage+" ($"+env+")")
	}

	str(&c.databaseURL, "database-url", "PGTABLES_DATABASE_URL", "", "PostgreSQL connection string; empty uses the libpq environment (PGHOST, ...), and without that either, runs a private PostgreSQL (local mode)")
	str(&c.dataDir, "data-dir", "PGTABLES_DATA_DIR", "pgtables-data", "local mode: the directory of the private PostgreSQL's data")
	boolean(&c.ephemeral, "ephemeral", "PGTABLES_LOCAL_EPHEMERAL", "false", "local mode: a throwaway PostgreSQL in a temporary directory removed at exit, with fsync off: NOT durable, for tests and CI")
	str(&c.localPGBin, "local-pg-bin", "PGTABLES_LOCAL_PG_BIN", "", "local mode: the directory of PostgreSQL's initdb and postgres; empty: pg_config --bindir, then PATH, then -local-pg-search")
	str(&c.localPGSearch, "local-pg-search", "PGTABLES_LOCAL_PG_SEARCH", strings.Join(localpg.DefaultPatterns(), string(filepath.ListSeparator)), "local mode: glob patterns of further directories to find PostgreSQL's binaries in, after PATH, separated by "+string(filepath.ListSeparator))
	str(&c.listen, "listen", "PGTABLES_LISTEN", "127.0.0.1:10002", "address to serve on")
	str(&c.accounts, "accounts", "PGTABLES_ACCOUNTS", "", "accounts as name1:key1[:key2];name2:key1; empty means the development account")
	str(&c.serviceDomains, "service-domains", "PGTABLES_SERVICE_DOMAINS", "", "comma-separated domains for host-style addressing (<account>.<domain>); empty accepts any host whose first label is an account")
	str(&c.logLevel, "log-level", "PGTABLES_LOG_LEVEL", "info", "debug, info, warn or error")
	str(&c.logFormat, "log-format", "PGTABLES_LOG_FORMAT", "", "json or text; empty: text when standard error is a terminal, else json")
	boolean(&c.accessLog, "access-log", "PGTABLES_ACCESS_LOG", "true", "log a line per request (at info; 5xx at warn)")
	boolean(&c.console, "console", "PGTABLES_CONSOLE", "true", "serve the web console at /-/console/")
	integer(&c.dbMaxConns, "db-max-conns", "PGTABLES_DB_MAX_CONNS", "20", 1, "maximum database connections")
	integer(&c.maxIndexes, "max-indexes", "PGTABLES_MAX_INDEXES", "10", 1, "property indexes a table may have (README: Property indexes)")
	str(&c.changeFeed, "change-feed", "PGTABLES_CHANGE_FEED", "auto", "the change feed of every account's tables: on, off, or auto: on with one PostgreSQL, off on Citus, where it adds a quarter to four fifths to a single write and doubles a batch (README: Change feed)")
	str(&c.changeFeedOff, "change-feed-off", "PGTABLES_CHANGE_FEED_ACCOUNTS_OFF", "", "comma-separated accounts whose change feed is off")
	duration(&c.changeFeedRetention, "change-feed-retention", "PGTABLES_CHANGE_FEED_RETENTION", "24h", "how long the change feed keeps changes")
	integer(&c.dbCombine, "db-combine", "PGTABLES_DB_COMBINE", "0", 0, "round trips of point reads, and of single-entity writes, in flight before further ones share them; 0: one per 16 connections, at least one")
	boolean(&c.citusRouting, "citus-routing", "PGTABLES_CITUS_ROUTING", "true", "on Citus, send each statement of one partition to the node that holds its shard, and each page of an indexed query across partitions to every node for its shards, rather than through the coordinator (the nodes' addresses in Citus's metadata must be reachable from here)")
	integer(&c.citusShards, "citus-shard-count", "PGTABLES_CITUS_SHARD_COUNT", "0", 0, "on Citus, the shards of entities when the migration distributes it; 0: the server's citus.shard_count if configured, else 4 per worker, at least 8")
	duration(&c.dbAcquireTimeout, "db-acquire-timeout", "PGTABLES_DB_ACQUIRE_TIMEOUT", "2s", "how long a request waits for a free database connection before 503 ServerBusy")
	duration(&c.dbFailoverWait, "db-failover-wait", "PGTABLES_DB_FAILOVER_WAIT", "0s", "how long a request waits for a writable primary when there is none (a failover): reads, and writes that certainly had no effect, are tried again meanwhile; 0: none, 503 ServerBusy at once")
	duration(&c.shutdownGrace, "shutdown-grace", "PGTABLES_SHUTDOWN_GRACE", "30s", "how long in-flight requests may take to finish on shutdown")
	duration(&c.shutdownDelay, "shutdown-delay", "PGTABLES_SHUTDOWN_DELAY", "0s", "how long to keep serving after SIGTERM with /-/ready at 503, before refusing new connections")
	duration(&c.readHeaderTimeout, "read-header-timeout", "PGTABLES_READ_HEADER_TIMEOUT", "10s", "time allowed to read a request's headers")
	duration(&c.readTimeout, "read-timeout", "PGTABLES_READ_TIMEOUT", "1m", "time allowed to read a whole request, body included")
	duration(&c.writeTimeout, "write-timeout", "PGTABLES_WRITE_TIMEOUT", "1m", "time allowed from the end of the request headers to the end of the response")
	duration(&c.idleTimeout, "idle-timeout", "PGTABLES_IDLE_TIMEOUT", "2m", "how long an idle keep-alive connection stays open")
	duration(&c.requestTimeout, "request-timeout", "PGTABLES_REQUEST_TIMEOUT", "30s", "bound on the work of one request, database included; 0 means none")
	integer(&c.maxHeaderBytes, "max-header-bytes", "PGTABLES_MAX_HEADER_BYTES", "65536", 4096, "maximum size of a request's headers")
	integer(&c.maxBodyBytes, "max-body-bytes", "PGTABLES_MAX_BODY_BYTES", "4194304", 1024, "maximum size of a request body (Azure: 4 MiB)")
	integer(&c.maxConcurrent, "max-concurrent-requests", "PGTABLES_MAX_CONCURRENT_REQUESTS", "512", 0, "requests answered at once; beyond it 503 ServerBusy; 0 means no limit")
	str(&c.tlsCert, "tls-cert", "PGTABLES_TLS_CERT", "", "PEM certificate (chain) file: serve HTTPS; needs -tls-key")
	str(&c.tlsKey, "tls-key", "PGTABLES_TLS_KEY", "", "PEM private key file for -tls-cert")
	str(&c.trustedProxies, "trusted-proxies", "PGTABLES_TRUSTED_PROXIES", "", "comma-separated CIDRs or addresses of proxies whose X-Forwarded-For/-Proto/-Host are believed")
	str(&c.pprofListen, "pprof-listen", "PGTABLES_PPROF_LISTEN", "", "address of a separate listener serving Go's pprof profiles (e.g. 127.0.0.1:6060, or unix:PATH for a Unix socket); empty: off")

	str(&c.oidcIssuers, "oidc-issuers", "PGTABLES_OIDC_ISSUERS", "", "comma-separated https URLs of the OpenID Connect issuers whose bearer tokens are accepted; empty: no bearer tokens")
	str(&c.oidcAudiences, "oidc-audiences", "PGTABLES_OIDC_AUDIENCES", "https://storage.azure.com,https://storage.azure.com/", "comma-separated audiences (aud) a token must name one of")
	str(&c.oidcGrants, "oidc-grants", "PGTABLES_OIDC_GRANTS", "", "grant rules mapping token claims to permissions: a JSON array, or a file holding one; empty: Azure's built-in role names in the roles claim")
	str(&c.oidcCAFile, "oidc-ca-file", "PGTABLES_OIDC_CA_FILE", "", "PEM file of CA certificates trusted, besides the system's, when fetching the issuers' discovery documents and keys")
	duration(&c.oidcFetchTimeout, "oidc-fetch-timeout", "PGTABLES_OIDC_FETCH_TIMEOUT", "10s", "bound on one fetch of an issuer's discovery document or keys")
	duration(&c.oidcLeeway, "oidc-leeway", "PGTABLES_OIDC_LEEWAY", "1m", "clock skew allowed on a token's exp and nbf")
	boolean(&c.oidcAllowHTTP, "oidc-allow-http", "PGTABLES_OIDC_ALLOW_HTTP", "false", "accept bearer tokens on plain-http requests (the SDKs send them over https only)")
	str(&c.oidcAuthzURI, "oidc-authorization-uri", "PGTABLES_OIDC_AUTHORIZATION_URI", "", "authorization_uri of the 401 challenge; empty: derived from the first issuer")
	str(&c.disallowSharedKey, "disallow-shared-key", "PGTABLES_DISALLOW_SHARED_KEY", "", "comma-separated accounts that refuse Shared Key and SAS and take bearer tokens only")

	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	// A bad environment value matters unless its flag replaced it.
	fs.Visit(func(f *flag.Flag) { delete(envErrs, f.Name) })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if err := envErrs[f.Name]; err != nil {
			errs = append(errs, err)
		}
	})
	c.sslModeSet = getenv("PGSSLMODE") != "" || sslModeIn(c.databaseURL)
	if c.changeFeed != "on" && c.changeFeed != "off" && c.changeFeed != "auto" {
		errs = append(errs, fmt.Errorf("change-feed: %q is not on, off or auto", c.changeFeed))
	}
	if c.changeFeedRetention <= 0 {
		errs = append(errs, errors.New("change-feed-retention must be more than 0"))
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		errs = append(errs, errors.New("tls-cert and tls-key go together"))
	}
	if c.oidcIssuers == "" && (c.oidcGrants != "" || c.disallowSharedKey != "" || c.oidcAuthzURI != "") {
		errs = append(errs, errors.New("oidc-grants, oidc-authorization-uri and disallow-shared-key need oidc-issuers"))
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	c.path = getenv("PATH")
	c.local = c.databaseURL == ""
	for _, v := range libpqEnv {
		if getenv(v) != "" {
			c.local = false
		}
	}
	if c.ephemeral && !c.local {
		return nil, nil, errors.New("ephemeral is for local mode, and a database is configured (PGTABLES_DATABASE_URL or PGHOST, ...)")
	}
	return c, fs.Args(), nil
}

// sslModeKeyword finds sslmode in a keyword/value connection string.
var sslModeKeyword = regexp.MustCompile(`(^|\s)sslmode\s*=`)

// sslModeIn reports whether the connection string (a URL or keyword/value
// pairs) sets sslmode.
func sslModeIn(conn string) bool {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		return err != nil || u.Query().Has("sslmode")
	}
	return sslModeKeyword.MatchString(conn)
}
