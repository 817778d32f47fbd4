package store

import "time"

// Observer is told about the store's work that is worth counting: the
// HTTP layer's metrics implement it. Methods are called on the request and
// purge paths, so they must be cheap and safe for concurrent use.
type Observer interface {
	// BatchRun reports an entity group transaction of size writes about to
	// be run.
	BatchRun(size int)
	// BatchRetried reports a batch that lost a serialization conflict (or
	// a deadlock) and is run again.
	BatchRetried()
	// PurgePass reports one pass of the purge of deleted tables; err is
	// the pass's error, if it stopped early.
	PurgePass(stats PurgeStats, err error)
	// PurgeChunk reports one committed chunk of the purge: it took d and
	// deleted n entities.
	PurgeChunk(d time.Duration, n int64)
}

// observerRef boxes an Observer for atomic.Pointer.
type observerRef struct{ Observer }

// nopObserver is the Observer of a store nobody observes.
type nopObserver struct{}

func (nopObserver) BatchRun(int)                    {}
func (nopObserver) BatchRetried()                   {}
func (nopObserver) PurgePass(PurgeStats, error)     {}
func (nopObserver) PurgeChunk(time.Duration, int64) {}

// SetObserver makes o the store's observer (nil: none). Set it before the
// store is used; it may be changed at any time, though.
func (s *Store) SetObserver(o Observer) {
	if o == nil {
		s.obs.Store(nil)
		return
	}
	s.obs.Store(&observerRef{o})
}

// observer returns the store's observer, never nil.
func (s *Store) observer() Observer {
	if ref := s.obs.Load(); ref != nil {
		return ref.Observer
	}
	return nopObserver{}
}
