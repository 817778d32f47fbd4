package changefeed

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Handler receives the changes of one transaction, in order. An error
// stops Follow before the transaction's cursor is saved, so the next run
// hands the transaction over again.
type Handler func(ctx context.Context, txn []Change) error

// Follower follows a table's feed from its checkpoint.
type Follower struct {
	Client *Client
	// Checkpoint keeps the cursor; nil: none, each Follow starts at From.
	Checkpoint Checkpoint
	// From is where to start without a saved cursor: Now (""), Oldest or
	// a change's cursor.
	From string
	// Limit is the most changes a request asks for; 0: the server's
	// default (1000).
	Limit int
	// Wait is how long a request waits for a change; 0: 20 s. It is
	// capped at MaxWait.
	Wait time.Duration
	// UntilCaughtUp makes Follow return nil once the feed has no more
	// changes, instead of waiting for new ones.
	UntilCaughtUp bool
	// MinBackoff and MaxBackoff bound the pause before trying again after
	// a network error or a 5xx; 0: 100 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// OnRetry, if set, hears of each failure Follow tries again after.
	OnRetry func(err error, pause time.Duration)
}

// Follow reads the feed and hands each transaction to h, saving the cursor
// after each. It retries network errors and the server's 5xx with backoff,
// and returns the handler's or checkpoint's error, an *Error for an answer
// that retrying cannot change (ErrCursorExpired, ErrTableNotFound,
// ErrDisabled, a bad request, a refused signature), or ctx's error.
func (f *Follower) Follow(ctx context.Context, h Handler) error {
	cursor, ok, err := "", false, error(nil)
	if f.Checkpoint != nil {
		if cursor, ok, err = f.Checkpoint.Load(ctx); err != nil {
			return err
		}
	}
	if !ok {
		cursor = f.From
		if cursor == "" {
			cursor = Now
		}
	}
	saved := ""
	if ok {
		saved = cursor
	}
	save := func(c string) error {
		if f.Checkpoint == nil || c == saved {
			return nil
		}
		if err := f.Checkpoint.Save(ctx, c); err != nil {
			return err
		}
		saved = c
		return nil
	}
	wait := f.Wait
	if wait <= 0 {
		wait = 20 * time.Second
	}
	if f.UntilCaughtUp {
		wait = 0
	}
	limit := f.Limit
	// pending is a transaction that may go on in the next page: the last
	// one of a full page.
	var pending []Change
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := f.Client.Read(ctx, cursor, limit, wait)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var fe *Error
			if errors.As(err, &fe) && !fe.Temporary() {
				return err
			}
			if errors.Is(err, errPage) {
				return err
			}
			failures++
			pause := f.backoff(failures)
			if f.OnRetry != nil {
				f.OnRetry(err, pause)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
			continue
		}
		failures = 0
		full := limit > 0 && len(page.Changes) >= limit || limit <= 0 && len(page.Changes) >= 1000
		changes := append(pending, page.Changes...)
		pending = nil
		txns := transactions(changes)
		if full && len(txns) > 0 {
			pending = txns[len(txns)-1]
			txns = txns[:len(txns)-1]
		}
		for _, txn := range txns {
			if err := h(ctx, txn); err != nil {
				return err
			}
			if err := save(txn[len(txn)-1].Cursor); err != nil {
				return err
			}
		}
		cursor = page.Cursor
		if len(pending) == 0 {
			// Also a resolved Now or Oldest with no change yet: a restart
			// must not skip what commits meanwhile.
			if err := save(cursor); err != nil {
				return err
			}
		}
		if f.UntilCaughtUp && !full {
			return nil // a page that is not full leaves nothing pending
		}
	}
}

// backoff is the pause before the n-th try in a row: doubling from the
// least, capped, with jitter so that followers do not come back together.
func (f *Follower) backoff(n int) time.Duration {
	lo, hi := f.MinBackoff, f.MaxBackoff
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 5 * time.Second
	}
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}
