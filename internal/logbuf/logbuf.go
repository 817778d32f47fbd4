// Package logbuf batches log lines into fewer writes: a server that logs a
// line per request would otherwise make a write system call per request
// (a few percent of its CPU under load, more than the line's encoding).
package logbuf

import (
	"io"
	"sync"
	"time"
)

// DefaultDelay is how long a line may wait before it is written. It bounds
// what a crash can lose; an orderly exit loses nothing (Close).
const DefaultDelay = 20 * time.Millisecond

// maxPending is the size of pending lines at which the writer that
// crosses it writes them at once, so that a burst cannot grow the buffer
// without bound.
const maxPending = 256 << 10

// Writer collects what is written to it and hands it to the underlying
// writer at most Delay later, in one write. It is safe for concurrent
// use; the order of writes is kept.
type Writer struct {
	w     io.Writer
	delay time.Duration

	mu      sync.Mutex // guards pending, spare, armed, closed
	pending []byte
	spare   []byte // the previous batch's buffer, reused
	armed   bool   // a flush is scheduled
	closed  bool

	out sync.Mutex // held while writing to w: batches go out in order
}

// New returns a Writer over w that writes at most delay after a line
// arrives; delay <= 0 writes through.
func New(w io.Writer, delay time.Duration) *Writer {
	return &Writer{w: w, delay: delay}
}

// Write queues p; it never fails (an error of the underlying writer is
// dropped, as a logger would drop it).
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed || b.delay <= 0 {
		b.mu.Unlock()
		b.out.Lock()
		defer b.out.Unlock()
		return b.w.Write(p)
	}
	b.pending = append(b.pending, p...)
	full := len(b.pending) >= maxPending
	if !full && !b.armed {
		b.armed = true
		time.AfterFunc(b.delay, b.Flush)
	}
	b.mu.Unlock()
	if full {
		b.Flush()
	}
	return len(p), nil
}

// Flush writes what is pending now.
func (b *Writer) Flush() {
	b.out.Lock()
	defer b.out.Unlock()
	b.flushHoldingOut(false)
}

// Close writes what is pending; later writes go straight through.
func (b *Writer) Close() error {
	b.out.Lock()
	defer b.out.Unlock()
	b.flushHoldingOut(true)
	return nil
}

// flushHoldingOut writes the pending batch; the caller holds b.out, so
// that no later write overtakes it. close makes later writes go through.
func (b *Writer) flushHoldingOut(close bool) {
	b.mu.Lock()
	batch := b.pending
	b.pending, b.spare = b.spare[:0], nil
	b.armed = false
	if close {
		b.closed = true
	}
	b.mu.Unlock()
	if len(batch) > 0 {
		_, _ = b.w.Write(batch)
	}
	if cap(batch) <= 2*maxPending {
		b.mu.Lock()
		b.spare = batch[:0]
		b.mu.Unlock()
	}
}
