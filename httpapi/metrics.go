package httpapi

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgtables/pgtables/store"
)

// Operation names, the values of the operation label of the request
// metrics and of the access log: a small fixed set.
const (
	labelQueryTables   = "query_tables"
	labelGetTable      = "get_table"
	labelCreateTable   = "create_table"
	labelDeleteTable   = "delete_table"
	labelInsertEntity  = "insert_entity"
	labelGetEntity     = "get_entity"
	labelQueryEntities = "query_entities"
	labelUpdateEntity  = "update_entity"
	labelMergeEntity   = "merge_entity"
	labelUpsertReplace = "upsert_replace"
	labelUpsertMerge   = "upsert_merge"
	labelDeleteEntity  = "delete_entity"
	labelBatch         = "batch"
	labelACL           = "acl"
	labelService       = "service"
	labelPreflight     = "preflight"
	labelUnknown       = "unknown"
)

// metrics are the Prometheus metrics of one Server, in a registry of its
// own (never the global default one), served at /-/metrics.
type metrics struct {
	reg *prometheus.Registry

	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	inFlight     prometheus.Gauge
	rejected     prometheus.Counter
	auth         *prometheus.CounterVec
	batchSize    prometheus.Histogram
	batchRetries prometheus.Counter
	returned     prometheus.Histogram
	examined     *prometheus.HistogramVec

	purgedEntities prometheus.Counter
	purgedTables   prometheus.Counter
	purgePending   prometheus.Gauge
	purgeErrors    prometheus.Counter
	purgeChunk     prometheus.Histogram

	handler http.Handler

	// series caches the children of requests, duration and auth by their
	// labels: WithLabelValues hashes the labels and takes the vector's
	// lock on every call, a noticeable share of a point read. The labels
	// come from small fixed sets (operations, status codes, schemes and
	// outcomes), so the cache stays small.
	seriesMu   sync.RWMutex
	reqSeries  map[requestLabels]requestSeries
	authSeries map[authLabels]prometheus.Counter
}

type requestLabels struct {
	op     string
	status int
}

type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

type authLabels struct{ scheme, outcome string }

func newMetrics(version string, pool *pgxpool.Pool) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(),
		reqSeries: map[requestLabels]requestSeries{}, authSeries: map[authLabels]prometheus.Counter{}}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgtables_http_requests_total",
		Help: "Protocol requests answered, by operation and HTTP status code.",
	}, []string{"operation", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pgtables_http_request_duration_seconds",
		Help:    "Time to answer protocol requests, by operation and HTTP status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"operation", "code"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pgtables_http_requests_in_flight",
		Help: "Protocol requests being answered.",
	})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pgtables_http_requests_rejected_total",
		Help: "Protocol requests answered 503 ServerBusy at once because the limit of concurrent requests was reached.",
	})
	m.auth = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pgtables_authentications_total",
		Help: "Authentications of protocol requests, by scheme (shared_key, shared_key_lite, sas, bearer, none, other) and outcome (success, failure, refused, unavailable).",
	}, []string{"scheme", "outcome"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "pgtables_batch_operations",
		Help:    "Operations per entity group transaction run.",
		Buckets: []float64{1, 2, 5, 10, 25, 50, 100},
	})
	m.batchRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pgtables_batch_serialization_retries_total",
		Help: "Entity group transactions run again after a serialization failure or deadlock.",
	})
	m.returned = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "pgtables_query_entities_returned",
		Help:    "Entities per Query Entities response page.",
		Buckets: []float64{0, 1, 10, 100, 1000},
	})
	m.examined = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pgtables_query_rows_examined",
		Help:    "Rows the database examined for a Query Entities page whose filter the keys do not serve, by shape: partition (the filter pins a PartitionKey) or table (across partitions). Counted on PostgreSQL; on Citus, chunked scans only.",
		Buckets: []float64{0, 10, 100, 1000, 10_000, 100_000, 1_000_000},
	}, []string{"shape"})
	m.purgedEntities = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pgtables_purge_entities_total",
		Help: "Entities of deleted tables removed by this process's background purge.",
	})
	m.purgedTables = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pgtables_purge_tables_total",
		Help: "Deleted tables whose purge this process finished.",
	})
	m.purgePending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pgtables_purge_tables_pending",
		Help: "Deleted tables not purged yet, as of this process's last purge pass.",
	})
	m.purgeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pgtables_purge_errors_total",
		Help: "Purge passes that stopped on an error.",
	})
	m.purgeChunk = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "pgtables_purge_chunk_seconds",
		Help:    "Duration of the purge's chunks, each one transaction deleting entities of a deleted table.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "pgtables_build_info",
		Help:        "Always 1; the version label is the running version.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	build.Set(1)
	for _, c := range []prometheus.Collector{
		m.requests, m.duration, m.inFlight, m.rejected, m.auth, m.batchSize, m.batchRetries, m.returned, m.examined,
		m.purgedEntities, m.purgedTables, m.purgePending, m.purgeErrors, m.purgeChunk, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		f(c)
	}
	if pool != nil {
		f(poolCollector{pool})
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// request records one answered protocol request.
func (m *metrics) request(op string, status int, seconds float64) {
	key := requestLabels{op, status}
	m.seriesMu.RLock()
	s, ok := m.reqSeries[key]
	m.seriesMu.RUnlock()
	if !ok {
		code := strconv.Itoa(status)
		s = requestSeries{m.requests.WithLabelValues(op, code), m.duration.WithLabelValues(op, code)}
		m.seriesMu.Lock()
		m.reqSeries[key] = s
		m.seriesMu.Unlock()
	}
	s.count.Inc()
	s.duration.Observe(seconds)
}

// authentication records one authentication of a protocol request.
func (m *metrics) authentication(scheme, outcome string) {
	key := authLabels{scheme, outcome}
	m.seriesMu.RLock()
	c, ok := m.authSeries[key]
	m.seriesMu.RUnlock()
	if !ok {
		c = m.auth.WithLabelValues(scheme, outcome)
		m.seriesMu.Lock()
		m.authSeries[key] = c
		m.seriesMu.Unlock()
	}
	c.Inc()
}

// BatchRun implements store.Observer.
func (m *metrics) BatchRun(size int) { m.batchSize.Observe(float64(size)) }

// BatchRetried implements store.Observer.
func (m *metrics) BatchRetried() { m.batchRetries.Inc() }

// PurgePass implements store.Observer.
func (m *metrics) PurgePass(st store.PurgeStats, err error) {
	m.purgedEntities.Add(float64(st.Entities))
	m.purgedTables.Add(float64(st.Tables))
	if err != nil {
		m.purgeErrors.Inc()
		return
	}
	m.purgePending.Set(float64(st.Pending))
}

// PurgeChunk implements store.Observer.
func (m *metrics) PurgeChunk(d time.Duration, _ int64) { m.purgeChunk.Observe(d.Seconds()) }

// poolCollector reports the database connection pool's figures.
type poolCollector struct{ pool *pgxpool.Pool }

var (
	poolDescs = struct {
		acquired, idle, constructing, total, max             *prometheus.Desc
		acquires, acquireSeconds, canceled, empty, emptyWait *prometheus.Desc
		newConns, lifetimeDestroy, idleDestroy               *prometheus.Desc
	}{
		acquired:        poolDesc("acquired_connections", "Connections in use."),
		idle:            poolDesc("idle_connections", "Idle connections."),
		constructing:    poolDesc("constructing_connections", "Connections being opened."),
		total:           poolDesc("connections", "Open connections (acquired, idle and being opened)."),
		max:             poolDesc("max_connections", "Maximum size of the pool."),
		acquires:        poolDesc("acquires_total", "Connections acquired from the pool."),
		acquireSeconds:  poolDesc("acquire_seconds_total", "Time spent acquiring connections."),
		canceled:        poolDesc("acquires_canceled_total", "Acquisitions given up: the wait for a free connection ran out, or the request ended."),
		empty:           poolDesc("acquires_empty_total", "Acquisitions that had to wait because no connection was idle."),
		emptyWait:       poolDesc("acquire_empty_wait_seconds_total", "Time spent waiting for a connection when none was idle."),
		newConns:        poolDesc("connections_opened_total", "Connections opened."),
		lifetimeDestroy: poolDesc("connections_closed_max_lifetime_total", "Connections closed for reaching their maximum lifetime."),
		idleDestroy:     poolDesc("connections_closed_max_idle_total", "Connections closed for idling too long."),
	}
)

func poolDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("pgtables_db_pool_"+name, help, nil, nil)
}

// Describe implements prometheus.Collector.
func (poolCollector) Describe(ch chan<- *prometheus.Desc) {
	d := poolDescs
	for _, x := range []*prometheus.Desc{d.acquired, d.idle, d.constructing, d.total, d.max,
		d.acquires, d.acquireSeconds, d.canceled, d.empty, d.emptyWait, d.newConns, d.lifetimeDestroy, d.idleDestroy} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	d := poolDescs
	g := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v)
	}
	n := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v)
	}
	g(d.acquired, float64(s.AcquiredConns()))
	g(d.idle, float64(s.IdleConns()))
	g(d.constructing, float64(s.ConstructingConns()))
	g(d.total, float64(s.TotalConns()))
	g(d.max, float64(s.MaxConns()))
	n(d.acquires, float64(s.AcquireCount()))
	n(d.acquireSeconds, s.AcquireDuration().Seconds())
	n(d.canceled, float64(s.CanceledAcquireCount()))
	n(d.empty, float64(s.EmptyAcquireCount()))
	n(d.emptyWait, s.EmptyAcquireWaitTime().Seconds())
	n(d.newConns, float64(s.NewConnsCount()))
	n(d.lifetimeDestroy, float64(s.MaxLifetimeDestroyCount()))
	n(d.idleDestroy, float64(s.MaxIdleDestroyCount()))
}
