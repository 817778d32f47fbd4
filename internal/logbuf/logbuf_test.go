package logbuf

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder counts the writes it gets.
type recorder struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	return r.buf.Write(p)
}

func (r *recorder) state() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String(), r.writes
}

func TestLinesBatchIntoOneWriteAndCloseWritesThem(t *testing.T) {
	t.Parallel()
	var rec recorder
	// A delay no test outlasts: only Close can write the lines.
	w := New(&rec, time.Hour)
	for i := range 100 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if got, n := rec.state(); n != 0 || got != "" {
		t.Fatalf("before Close: %d writes (%q), want none", n, got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, n := rec.state()
	if n != 1 {
		t.Errorf("%d writes for 100 lines, want 1", n)
	}
	if lines := strings.Count(got, "\n"); lines != 100 || !strings.HasPrefix(got, "line 0\n") || !strings.HasSuffix(got, "line 99\n") {
		t.Errorf("wrote %d lines: %q...", lines, got[:min(len(got), 40)])
	}
	// After Close, writes go straight through.
	fmt.Fprintf(w, "late\n")
	if got, n := rec.state(); n != 2 || !strings.HasSuffix(got, "late\n") {
		t.Errorf("a write after Close: %d writes, ends %q", n, got[len(got)-10:])
	}
}

func TestConcurrentLinesStayWholeAndInOrder(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, time.Millisecond, time.Hour} {
		t.Run(delay.String(), func(t *testing.T) {
			t.Parallel()
			var rec recorder
			w := New(&rec, delay)
			const writers, lines = 8, 2000
			var wg sync.WaitGroup
			for g := range writers {
				wg.Go(func() {
					for i := range lines {
						// Long enough lines that some cross maxPending.
						fmt.Fprintf(w, "g%d %06d %s\n", g, i, strings.Repeat("x", 100))
					}
				})
			}
			wg.Wait()
			w.Close()
			got, _ := rec.state()
			next := make([]int, writers)
			count := 0
			for l := range strings.Lines(got) {
				var g, i int
				var pad string
				if _, err := fmt.Sscanf(l, "g%d %d %s\n", &g, &i, &pad); err != nil || len(pad) != 100 {
					t.Fatalf("torn line %q: %v", l, err)
				}
				if i != next[g] {
					t.Fatalf("writer %d: line %d after %d", g, i, next[g]-1)
				}
				next[g]++
				count++
			}
			if count != writers*lines {
				t.Errorf("%d lines, want %d", count, writers*lines)
			}
		})
	}
}

func TestALineGoesOutWithoutClose(t *testing.T) {
	t.Parallel()
	var rec recorder
	w := New(&rec, time.Millisecond)
	fmt.Fprintf(w, "alone\n")
	// No bound on when, only that it happens: poll for long.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if got, _ := rec.state(); got == "alone\n" {
			return
		}
	}
	got, _ := rec.state()
	t.Fatalf("after 10 s: %q, want the line", got)
}
