package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/changefeed"
	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/tableapi"
)

// feedReader follows a table's change feed from its oldest change for the
// whole of a test, through switchovers and failovers, as a consumer of
// the feed would (package changefeed retries 503s and lost connections).
type feedReader struct {
	client *changefeed.Client
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	changes []changefeed.Change
}

func followFeed(t *testing.T, p *pgtables, table string) *feedReader {
	t.Helper()
	api, err := tableapi.NewClient(p.url+"/"+httpapi.DevAccount, httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &feedReader{client: changefeed.NewClient(api, table), cancel: cancel, done: make(chan error, 1)}
	f := &changefeed.Follower{Client: r.client, From: changefeed.Oldest, Wait: time.Second, MaxBackoff: time.Second}
	go func() {
		r.done <- f.Follow(ctx, func(_ context.Context, txn []changefeed.Change) error {
			r.mu.Lock()
			r.changes = append(r.changes, txn...)
			r.mu.Unlock()
			return nil
		})
	}()
	return r
}

// waitFor waits until the reader has read the change that gave etag.
func (r *feedReader) waitFor(t *testing.T, etag string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r.mu.Lock()
		n := len(r.changes)
		seen := n > 0 && r.changes[n-1].ETag == etag
		for i := n - 1; i >= 0 && !seen; i-- {
			seen = r.changes[i].ETag == etag
		}
		r.mu.Unlock()
		if seen {
			return
		}
		select {
		case err := <-r.done:
			t.Fatalf("the feed's reader stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the feed's reader did not reach the change of %s within %v (%d changes read)", etag, within, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the reader and returns what it read.
func (r *feedReader) stop() []changefeed.Change {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changes
}

// checkFeedAfterFailover checks what a reader that followed the feed
// through a switchover and a failover read: exactly the feed as read
// again afterwards from its oldest change (nothing skipped, nothing
// repeated), and a feed that, replayed, gives the table as it is: every
// entity with the ETag of its last change, and no entity that the feed
// does not end with (so no committed write is missing as a table's last
// state, and no write that was rolled back appears as one).
func checkFeedAfterFailover(t *testing.T, ctx context.Context, r *feedReader, read []changefeed.Change, c *aztables.Client) {
	t.Helper()
	var again []changefeed.Change
	f := &changefeed.Follower{Client: r.client, From: changefeed.Oldest, UntilCaughtUp: true}
	if err := f.Follow(ctx, func(_ context.Context, txn []changefeed.Change) error {
		again = append(again, txn...)
		return nil
	}); err != nil {
		t.Fatalf("read the feed again: %v", err)
	}
	if len(read) != len(again) {
		t.Errorf("the reader that followed the failover read %d changes; the feed read again afterwards has %d", len(read), len(again))
	}
	for i := range min(len(read), len(again)) {
		if read[i].Cursor != again[i].Cursor || read[i].ETag != again[i].ETag {
			t.Errorf("change %d: the reader read %s %s/%s (%s), the feed read again has %s %s/%s (%s)", i,
				read[i].Op, read[i].PartitionKey, read[i].RowKey, read[i].ETag,
				again[i].Op, again[i].PartitionKey, again[i].RowKey, again[i].ETag)
			break
		}
	}

	type key struct{ pk, rk string }
	replayed := map[key]string{}
	for _, ch := range again {
		k := key{ch.PartitionKey, ch.RowKey}
		if ch.Op == changefeed.OpDelete {
			delete(replayed, k)
		} else {
			replayed[k] = ch.ETag
		}
	}
	table := map[key]string{}
	pager := c.NewListEntitiesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, b := range page.Entities {
			var e struct {
				PK   string `json:"PartitionKey"`
				RK   string `json:"RowKey"`
				ETag string `json:"odata.etag"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			table[key{e.PK, e.RK}] = e.ETag
		}
	}
	var problems []string
	for k, etag := range table {
		switch last, ok := replayed[k]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s/%s is in the table, not in the feed", k.pk, k.rk))
		case last != etag:
			problems = append(problems, fmt.Sprintf("%s/%s has ETag %s; its last change in the feed %s", k.pk, k.rk, etag, last))
		}
	}
	for k := range replayed {
		if _, ok := table[k]; !ok {
			problems = append(problems, fmt.Sprintf("%s/%s: the feed ends with it present, the table lacks it", k.pk, k.rk))
		}
	}
	for i, p := range problems {
		if i == 20 {
			t.Errorf("... and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
	t.Logf("change feed: %d changes read through the switchover and the failover, the same read again afterwards; replayed, %d entities, as in the table", len(read), len(table))
}
