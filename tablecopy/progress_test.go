package tablecopy

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The entities read are charged to the rate: reading 1,000 at 100 a
// second makes the next read wait about 10 s, which a cancelled context
// cuts short.
func TestRateLimitSpacesReads(t *testing.T) {
	t.Parallel()
	r := newRateLimit(100)
	if err := r.wait(context.Background()); err != nil {
		t.Fatal(err) // nothing read yet: no wait
	}
	r.took(1000)
	if d := time.Until(r.next); d < 9*time.Second || d > 10*time.Second {
		t.Errorf("after 1,000 entities at 100/s the next read waits %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.wait(ctx); err == nil {
		t.Error("a cancelled wait returned no error")
	}
	if newRateLimit(0) != nil {
		t.Error("rate 0 limits")
	}
}

// Progress counts every entity written, per table, and marks the tables
// done.
func TestProgressCountsWrites(t *testing.T) {
	t.Parallel()
	src := &memTables{tables: map[string][]Entity{}}
	for _, table := range []string{"a", "b"} {
		for i := range 2500 {
			src.tables[table] = append(src.tables[table], Entity{PartitionKey: fmt.Sprintf("p%02d", i/100), RowKey: fmt.Sprintf("r%05d", i)})
		}
	}
	p := &Progress{}
	if _, err := Copy(context.Background(), src, &memTables{tables: map[string][]Entity{}}, Options{Progress: p}); err != nil {
		t.Fatal(err)
	}
	total, tables := p.Snapshot()
	if total != 5000 || len(tables) != 2 || tables[0] != (TableProgress{"a", 2500, true}) || tables[1] != (TableProgress{"b", 2500, true}) {
		t.Errorf("progress: %d, %+v", total, tables)
	}
}
