package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/pgtables/pgtables/odata/filter"
)

func TestKeyRangeContains(t *testing.T) {
	t.Parallel()
	lower := &KeyBound{PK: "b", RK: "2", HasRK: true}
	upper := &KeyBound{PK: "d", RK: "5", HasRK: true}
	tests := []struct {
		r      KeyRange
		pk, rk string
		want   bool
	}{
		{KeyRange{}, "", "", true},
		{KeyRange{Lower: lower}, "b", "2", true},
		{KeyRange{Lower: lower}, "b", "1", false},
		{KeyRange{Lower: lower}, "a", "9", false},
		{KeyRange{Lower: lower}, "c", "", true},
		{KeyRange{Upper: upper}, "d", "5", true},
		{KeyRange{Upper: upper}, "d", "6", false},
		{KeyRange{Upper: upper}, "d", "50", false},
		{KeyRange{Upper: upper}, "e", "", false},
		{KeyRange{Lower: &KeyBound{PK: "b"}}, "b", "", true},
		{KeyRange{Lower: &KeyBound{PK: "b"}}, "a", "zzz", false},
		{KeyRange{Upper: &KeyBound{PK: "d"}}, "d", "\uffff", true},
		{KeyRange{Upper: &KeyBound{PK: "d"}}, "d0", "", false},
		{KeyRange{Lower: lower, Upper: upper}, "c", "anything", true},
	}
	for _, tt := range tests {
		if got := tt.r.Contains(tt.pk, tt.rk); got != tt.want {
			t.Errorf("%+v/%+v contains (%q,%q) = %v, want %v", tt.r.Lower, tt.r.Upper, tt.pk, tt.rk, got, tt.want)
		}
	}
}

// TestQueryKeyRange checks that a key range clips every kind of query,
// including across pages and in chunked scans, to exactly the keys that
// Contains admits.
func TestQueryKeyRange(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	chunked := NewWithOptions(s.pool, Options{ScanChunk: 2})
	ctx := context.Background()
	const table = "ranged"
	if err := s.CreateTable(ctx, acct, table); err != nil {
		t.Fatal(err)
	}
	var all [][2]string
	for _, pk := range []string{"a", "b", "c", "d", "e"} {
		for _, rk := range []string{"1", "2", "3", "5", "6"} {
			w := Write{Op: OpInsert, PartitionKey: pk, RowKey: rk, Properties: props("V", 1)}
			if _, err := s.Write(ctx, acct, table, &w); err != nil {
				t.Fatal(err)
			}
			all = append(all, [2]string{pk, rk})
		}
	}
	ranges := []KeyRange{
		{},
		{Lower: &KeyBound{PK: "b", RK: "2", HasRK: true}, Upper: &KeyBound{PK: "d", RK: "5", HasRK: true}},
		{Lower: &KeyBound{PK: "b"}, Upper: &KeyBound{PK: "d"}},
		{Lower: &KeyBound{PK: "c", RK: "3", HasRK: true}, Upper: &KeyBound{PK: "c", RK: "3", HasRK: true}},
		{Lower: &KeyBound{PK: "c"}},
		{Upper: &KeyBound{PK: "b", RK: "4", HasRK: true}},
		{Lower: &KeyBound{PK: "x"}},
	}
	filters := []string{"", "V eq 1", "PartitionKey ge 'a' and V eq 1", "RowKey ne '3'"}
	for _, r := range ranges {
		for _, f := range filters {
			for _, st := range []*Store{s, chunked} {
				var fe *filter.Expr
				if f != "" {
					var err error
					if fe, err = filter.Parse(f); err != nil {
						t.Fatal(err)
					}
				}
				var want [][2]string
				for _, k := range all {
					if r.Contains(k[0], k[1]) && (f != "RowKey ne '3'" || k[1] != "3") {
						want = append(want, k)
					}
				}
				q := EntityQuery{Filter: fe, Top: 2, Range: r}
				var got [][2]string
				for pages := 0; ; pages++ {
					if pages > 100 {
						t.Fatal("too many pages")
					}
					page, err := st.QueryEntities(ctx, acct, table, q)
					if err != nil {
						t.Fatal(err)
					}
					for _, e := range page.Entities {
						got = append(got, [2]string{e.PartitionKey, e.RowKey})
					}
					if !page.More {
						break
					}
					q.FromPK, q.FromRK, q.HasFromPK, q.HasFromRK = page.NextPK, page.NextRK, true, true
				}
				if !slices.Equal(got, want) {
					t.Errorf("range %v..%v filter %q chunked=%v: got %v, want %v", r.Lower, r.Upper, f, st == chunked, got, want)
				}
			}
		}
	}
}

func TestACL(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.GetACL(ctx, acct, "nope"); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("get acl of missing table: %v", err)
	}
	if err := s.SetACL(ctx, acct, "nope", nil); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("set acl of missing table: %v", err)
	}
	if err := s.CreateTable(ctx, acct, "Policies"); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetACL(ctx, acct, "policies")
	if err != nil || len(got) != 0 {
		t.Fatalf("empty acl: %v %v", got, err)
	}
	start, expiry, perm := int64(100), int64(200), "ra"
	want := []AccessPolicy{
		{ID: "zeta", Permission: &perm},
		{ID: "alpha", Start: &start, Expiry: &expiry, Permission: &perm},
		{ID: "bare"},
	}
	if err := s.SetACL(ctx, acct, "POLICIES", want); err != nil {
		t.Fatal(err)
	}
	if got, err = s.GetACL(ctx, acct, "Policies"); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v, want %+v", got, err, want)
	}
	p, err := s.AccessPolicy(ctx, acct, "policies", "alpha")
	if err != nil || !reflect.DeepEqual(*p, want[1]) {
		t.Fatalf("policy alpha: %+v %v", p, err)
	}
	if _, err := s.AccessPolicy(ctx, acct, "policies", "ALPHA"); !errors.Is(err, ErrPolicyNotFound) {
		t.Fatalf("ids are case-sensitive: %v", err)
	}
	// Replacing drops what is not set again.
	if err := s.SetACL(ctx, acct, "policies", want[2:]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AccessPolicy(ctx, acct, "policies", "alpha"); !errors.Is(err, ErrPolicyNotFound) {
		t.Fatalf("removed policy: %v", err)
	}
	// The policies go with the table, also when its name is reused.
	if err := s.DeleteTable(ctx, acct, "policies"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AccessPolicy(ctx, acct, "policies", "bare"); !errors.Is(err, ErrPolicyNotFound) {
		t.Fatalf("policy of deleted table: %v", err)
	}
	if err := s.CreateTable(ctx, acct, "policies"); err != nil {
		t.Fatal(err)
	}
	if got, err = s.GetACL(ctx, acct, "policies"); err != nil || len(got) != 0 {
		t.Fatalf("acl of new table of the same name: %+v %v", got, err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM table_acls`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows before purge: %d %v", n, err)
	}
	if _, err := s.PurgeOnce(ctx, PurgeConfig{Chunk: 10, Grace: -1}); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM table_acls`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after purge: %d %v", n, err)
	}
}

func TestServiceProperties(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	p, err := s.ServiceProperties(ctx, acct)
	if err != nil || !reflect.DeepEqual(p, DefaultServiceProperties()) {
		t.Fatalf("defaults: %+v %v", p, err)
	}
	if rules, err := s.CorsRules(ctx, acct); err != nil || rules != nil {
		t.Fatalf("no rules: %v %v", rules, err)
	}
	rule := CorsRule{AllowedOrigins: "*", AllowedMethods: "GET", MaxAgeInSeconds: 5}
	err = s.UpdateServiceProperties(ctx, acct, func(p *ServiceProperties) error {
		p.Cors = []CorsRule{rule}
		p.Logging.Read = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	refused := fmt.Errorf("refused")
	err = s.UpdateServiceProperties(ctx, acct, func(p *ServiceProperties) error {
		p.Cors = nil
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("refused update: %v", err)
	}
	if rules, err := s.CorsRules(ctx, acct); err != nil || !reflect.DeepEqual(rules, []CorsRule{rule}) {
		t.Fatalf("rules: %+v %v", rules, err)
	}
	if rules, err := s.CorsRules(ctx, "other"); err != nil || rules != nil {
		t.Fatalf("rules of another account: %v %v", rules, err)
	}
	want := DefaultServiceProperties()
	want.Cors = []CorsRule{rule}
	want.Logging.Read = true
	if p, err = s.ServiceProperties(ctx, acct); err != nil || !reflect.DeepEqual(p, want) {
		t.Fatalf("got %+v %v", p, err)
	}
}
