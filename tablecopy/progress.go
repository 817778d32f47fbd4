package tablecopy

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Progress counts what a copy has written, per table, for a caller that
// shows it while the copy runs. Safe for concurrent use.
type Progress struct {
	mu     sync.Mutex
	tables map[string]*tableProgress
}

type tableProgress struct {
	written int64
	done    bool
}

// TableProgress is one table's line of a progress report.
type TableProgress struct {
	Table   string
	Written int64
	Done    bool
}

func (p *Progress) add(table string, n int64, done bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tables == nil {
		p.tables = map[string]*tableProgress{}
	}
	t := p.tables[table]
	if t == nil {
		t = &tableProgress{}
		p.tables[table] = t
	}
	t.written += n
	t.done = t.done || done
}

// Snapshot returns the entities written in all and per table, by name.
func (p *Progress) Snapshot() (int64, []TableProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total int64
	tables := make([]TableProgress, 0, len(p.tables))
	for name, t := range p.tables {
		total += t.written
		tables = append(tables, TableProgress{Table: name, Written: t.written, Done: t.done})
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].Table < tables[j].Table })
	return total, tables
}

// rateLimit spaces the reads of all tables so that entities come out of
// the source at no more than a rate, as copying out of a production
// account asks.
type rateLimit struct {
	mu   sync.Mutex
	per  time.Duration // the time one entity is worth
	next time.Time     // when the next read may start
}

func newRateLimit(perSecond float64) *rateLimit {
	if perSecond <= 0 {
		return nil
	}
	return &rateLimit{per: time.Duration(float64(time.Second) / perSecond)}
}

// wait waits until a read may start.
func (r *rateLimit) wait(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	d := time.Until(r.next)
	r.mu.Unlock()
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// took charges n entities read.
func (r *rateLimit) took(n int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); r.next.Before(now) {
		r.next = now
	}
	r.next = r.next.Add(time.Duration(n) * r.per)
}
