package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/internal/sdkfail"
)

// txFailure returns the status and code of a failed SubmitTransaction
// without failing the test, for use from goroutines: the error
// sub-response's for a 202 answer, else the response's.
func txFailure(err error) (status int, code string) { return sdkfail.Of(err) }

// counter is an entity of the transfer test.
type counter struct {
	V     int64
	Moves int64
}

// TestBatchConcurrentTransfers: clients move one unit at a time between two
// counters of one partition, each move a batch that replaces both counters
// under their ETags and adds a log entity. Moves that lose the race get 412
// and are retried after reading again. Afterwards the total is unchanged,
// every acknowledged move is in the log and in the move count (none lost,
// none applied twice), and the counters moved by exactly the acknowledged
// moves.
func TestBatchConcurrentTransfers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c, table := e.newTable()
	const (
		clients   = 8
		moves     = 30 // acknowledged moves per client
		initial   = 1000
		toB       = 6 // clients 0..toB-1 move A→B, the others B→A
		maxTries  = moves * 100
		partition = "acct"
	)
	for _, rk := range []string{"A", "B"} {
		if _, err := c.AddEntity(ctx, batchEntity(t, partition, rk, map[string]any{"V": initial, "Moves": 0}), nil); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rk string) (counter, azcore.ETag, error) {
		g, err := c.GetEntity(ctx, partition, rk, nil)
		if err != nil {
			return counter{}, "", err
		}
		var v counter
		err = json.Unmarshal(g.Value, &v)
		return v, g.ETag, err
	}
	type tally struct{ acked, conflicts, busy int }
	tallies := make([]tally, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			delta := int64(-1) // A→B
			if i >= toB {
				delta = 1
			}
			tl := &tallies[i]
			for tries := 0; tl.acked < moves; tries++ {
				if tries == maxTries {
					t.Errorf("client %d: %d moves after %d tries", i, tl.acked, tries)
					return
				}
				a, etagA, err := read("A")
				if err != nil {
					t.Errorf("client %d: read A: %v", i, err)
					return
				}
				b, etagB, err := read("B")
				if err != nil {
					t.Errorf("client %d: read B: %v", i, err)
					return
				}
				_, err = c.SubmitTransaction(ctx, []aztables.TransactionAction{
					{ActionType: aztables.TransactionTypeUpdateReplace, IfMatch: &etagA,
						Entity: batchEntity(t, partition, "A", map[string]any{"V": a.V + delta, "Moves": a.Moves + 1})},
					{ActionType: aztables.TransactionTypeUpdateReplace, IfMatch: &etagB,
						Entity: batchEntity(t, partition, "B", map[string]any{"V": b.V - delta, "Moves": b.Moves})},
					{ActionType: aztables.TransactionTypeAdd,
						Entity: batchEntity(t, partition, fmt.Sprintf("log-%d-%03d", i, tl.acked), map[string]any{"Delta": delta})},
				}, nil)
				if err == nil {
					tl.acked++
					continue
				}
				switch status, code := txFailure(err); {
				case status == http.StatusPreconditionFailed && code == "UpdateConditionNotSatisfied":
					tl.conflicts++
				case status == http.StatusServiceUnavailable && code == "ServerBusy":
					tl.busy++ // the server gave up retrying; nothing was written
				default:
					t.Errorf("client %d: move failed with %d %s: %v", i, status, code, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total := tally{}
	for _, tl := range tallies {
		total.acked += tl.acked
		total.conflicts += tl.conflicts
		total.busy += tl.busy
	}
	t.Logf("%d moves acknowledged, %d lost the ETag race, %d answered ServerBusy", total.acked, total.conflicts, total.busy)
	a, _, err := read("A")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := read("B")
	if err != nil {
		t.Fatal(err)
	}
	if a.V+b.V != 2*initial {
		t.Errorf("A+B = %d+%d = %d, want %d", a.V, b.V, a.V+b.V, 2*initial)
	}
	wantA := int64(initial - toB*moves + (clients-toB)*moves)
	if a.V != wantA {
		t.Errorf("A = %d, want %d after the acknowledged moves", a.V, wantA)
	}
	if a.Moves != int64(total.acked) {
		t.Errorf("A counts %d moves, %d were acknowledged", a.Moves, total.acked)
	}
	rows := tableRows(t, e, table)
	logs := 0
	for k := range rows {
		if strings.HasPrefix(k, partition+"/log-") {
			logs++
		}
	}
	if logs != total.acked {
		t.Errorf("%d log entities, %d moves acknowledged", logs, total.acked)
	}
	for i := range clients {
		for n := range moves {
			if _, ok := rows[fmt.Sprintf("%s/log-%d-%03d", partition, i, n)]; !ok {
				t.Errorf("acknowledged move %d of client %d has no log entity", n, i)
			}
		}
	}
}
