package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgtables/pgtables/changefeed"
)

// checkFeed, the chaos test's judge, finds each way a feed can break its
// guarantees, and accepts a write of unknown outcome present or absent.
func TestChaosCheckFeed(t *testing.T) {
	t.Parallel()
	writes := func() []*chaosWrite {
		return []*chaosWrite{
			{id: "p-1", pk: "p", rk: "r1", op: changefeed.OpInsert, seq: 1, outcome: acked, etag: "e1"},
			{id: "p-2", pk: "p", rk: "r1", op: changefeed.OpMerge, seq: 2, outcome: acked},
			{id: "p-3", batch: "p-b3", pk: "p", rk: "r2", op: changefeed.OpInsert, seq: 3, outcome: acked},
			{batch: "p-b3", pk: "p", rk: "r1", op: changefeed.OpDelete, seq: 4, outcome: acked},
			{id: "p-5", pk: "p", rk: "r3", op: changefeed.OpInsert, seq: 5, outcome: unknown},
			{id: "p-6", pk: "p", rk: "r4", op: changefeed.OpInsert, seq: 6, outcome: refused},
			{id: "q-1", pk: "q", rk: "r1", op: changefeed.OpInsert, seq: 1, outcome: acked},
			{id: "p-7", pk: "p", rk: "r2", op: changefeed.OpMerge, seq: 7, outcome: unknown},
		}
	}
	change := func(w *chaosWrite, txn string) changefeed.Change {
		c := changefeed.Change{Op: w.op, Txn: txn, PartitionKey: w.pk, RowKey: w.rk, ETag: w.etag}
		if w.op != changefeed.OpDelete {
			c.Entity, _ = json.Marshal(map[string]string{"W": w.id})
		}
		c.Raw, _ = json.Marshal(c)
		return c
	}
	// The feed as it should be: p-5 absent.
	good := func(ws []*chaosWrite) []changefeed.Change {
		return []changefeed.Change{change(ws[0], "t1"), change(ws[6], "t2"), change(ws[1], "t3"), change(ws[2], "t4"), change(ws[3], "t4")}
	}
	tests := []struct {
		name  string
		feed  func(ws []*chaosWrite) []changefeed.Change
		wants string // a word of the problem; "" for none
	}{
		{"as written", good, ""},
		{"with the unknown write", func(ws []*chaosWrite) []changefeed.Change {
			return append(good(ws), change(ws[4], "t5"))
		}, ""},
		{"an unknown write committed late", func(ws []*chaosWrite) []changefeed.Change {
			f := good(ws)
			return []changefeed.Change{f[0], f[1], change(ws[4], "t5"), f[2], f[3], f[4]}
		}, ""},
		{"an unknown write before its entity's acknowledged one", func(ws []*chaosWrite) []changefeed.Change {
			f := good(ws)
			return []changefeed.Change{f[0], f[1], change(ws[7], "t5"), f[2], f[3], f[4]}
		}, "unknown outcome"},
		{"an acknowledged write dropped", func(ws []*chaosWrite) []changefeed.Change {
			return append(good(ws)[:1], good(ws)[2:]...)
		}, "not in the feed"},
		{"a write twice", func(ws []*chaosWrite) []changefeed.Change {
			return append(good(ws), change(ws[6], "t2"))
		}, "are one write"},
		{"a refused write", func(ws []*chaosWrite) []changefeed.Change {
			return append(good(ws), change(ws[5], "t6"))
		}, "refused"},
		{"out of order in a partition", func(ws []*chaosWrite) []changefeed.Change {
			f := good(ws)
			f[0], f[2] = f[2], f[0]
			return f
		}, "after write"},
		{"a batch split", func(ws []*chaosWrite) []changefeed.Change {
			f := good(ws)
			return []changefeed.Change{f[0], f[2], f[3], f[1], f[4]}
		}, "batch p-b3"},
		{"a batch in two transactions", func(ws []*chaosWrite) []changefeed.Change {
			f := good(ws)
			f[4].Txn = "t9"
			return f
		}, "transactions"},
		{"half a batch", func(ws []*chaosWrite) []changefeed.Change {
			return good(ws)[:4]
		}, "batch p-b3"},
		{"two writes in one transaction", func(ws []*chaosWrite) []changefeed.Change {
			f := good(ws)
			f[1].Txn = "t1"
			return f
		}, "shared"},
		{"another etag", func(ws []*chaosWrite) []changefeed.Change {
			f := good(ws)
			f[0].ETag = "e2"
			return f
		}, "etag"},
		{"another op", func(ws []*chaosWrite) []changefeed.Change {
			f := good(ws)
			f[2].Op = changefeed.OpReplace
			return f
		}, "its write"},
		{"a change of no write", func(ws []*chaosWrite) []changefeed.Change {
			return append(good(ws), change(&chaosWrite{id: "x", pk: "p", rk: "r9", op: changefeed.OpInsert}, "t7"))
		}, "no write"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws := writes()
			problems := checkFeed(ws, tt.feed(ws))
			all := strings.Join(problems, "\n")
			if tt.wants == "" && len(problems) > 0 || tt.wants != "" && !strings.Contains(all, tt.wants) {
				t.Errorf("problems %q, want one with %q", problems, tt.wants)
			}
		})
	}
}
