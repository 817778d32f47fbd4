package tablecopy

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// memTables holds tables in memory: a source that pages them in key order
// as a Table endpoint does, and a destination that records what arrives.
type memTables struct {
	mu     sync.Mutex
	tables map[string][]Entity
}

func (m *memTables) Tables(_ context.Context, prefix string) ([]string, error) {
	var names []string
	for n := range m.tables {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

func (m *memTables) Page(_ context.Context, table, _, token string) ([]Entity, string, error) {
	all := m.tables[table]
	from := 0
	if token != "" {
		fmt.Sscan(token, &from)
	}
	to := min(from+1000, len(all))
	if to == len(all) {
		return all[from:to], "", nil
	}
	return all[from:to], fmt.Sprint(to), nil
}

func (m *memTables) CreateTable(_ context.Context, table string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tables[table]; !ok {
		m.tables[table] = nil
	}
	return nil
}

func (m *memTables) Write(_ context.Context, table string, entities []Entity) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tables[table] = append(m.tables[table], entities...)
	return nil
}

// Tables of many small partitions, written at once into a dump and read
// back, arrive whole: the partitions written at the same time do not mix
// in the table's file.
func TestDumpHoldsConcurrentWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &memTables{tables: map[string][]Entity{}}
	for _, table := range []string{"a", "b", "c"} {
		for i := range 3000 {
			src.tables[table] = append(src.tables[table], Entity{
				PartitionKey: fmt.Sprintf("p%05d", i/(1+i%3)), RowKey: fmt.Sprintf("r%05d", i),
				Props: []Prop{{Name: "V", Type: "Edm.Int64", Value: []byte(fmt.Sprintf(`"%d"`, i))}, {Name: "S", Type: "Edm.String", Value: []byte(`"` + strings.Repeat("x", i%100*40) + `"`)}},
			})
		}
		sort.Slice(src.tables[table], func(i, j int) bool {
			a, b := src.tables[table][i], src.tables[table][j]
			return a.PartitionKey < b.PartitionKey || a.PartitionKey == b.PartitionKey && a.RowKey < b.RowKey
		})
	}
	dir := t.TempDir()
	dump, err := CreateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Each table's partitions written at once, as a caller of Dir may.
	var wg sync.WaitGroup
	errs := make(chan error, 9000)
	for table, entities := range src.tables {
		if err := dump.CreateTable(ctx, table); err != nil {
			t.Fatal(err)
		}
		for len(entities) > 0 {
			n := 1
			for n < len(entities) && entities[n].PartitionKey == entities[0].PartitionKey {
				n++
			}
			run := entities[:n]
			entities = entities[n:]
			wg.Add(1)
			go func() { defer wg.Done(); errs <- dump.Write(ctx, table, run) }()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := dump.Close(); err != nil {
		t.Fatal(err)
	}
	back, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	dst := &memTables{tables: map[string][]Entity{}}
	results, err := Copy(ctx, back, dst, Options{})
	if err != nil || len(results) != 3 {
		t.Fatalf("%+v %v", results, err)
	}
	for table, want := range src.tables {
		got := dst.tables[table]
		sort.Slice(got, func(i, j int) bool {
			a, b := got[i], got[j]
			return a.PartitionKey < b.PartitionKey || a.PartitionKey == b.PartitionKey && a.RowKey < b.RowKey
		})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("table %s: %d entities back of %d, or changed", table, len(got), len(want))
		}
	}
}

// stopAfter is a source whose context is cancelled, as by a kill, once it
// has served a number of pages.
type stopAfter struct {
	Source
	pages  atomic.Int32
	after  int32
	cancel context.CancelFunc
}

func (s *stopAfter) Page(ctx context.Context, table, filter, token string) ([]Entity, string, error) {
	if s.pages.Add(1) > s.after {
		s.cancel()
		<-ctx.Done()
		return nil, "", ctx.Err()
	}
	return s.Source.Page(ctx, table, filter, token)
}

// A copy into a dump stopped midway and started again with its checkpoint
// ends with every entity exactly once, and skips the tables it finished.
func TestCopyContinuesFromCheckpoint(t *testing.T) {
	t.Parallel()
	src := &memTables{tables: map[string][]Entity{}}
	for _, table := range []string{"a", "b"} {
		for i := range 4500 {
			src.tables[table] = append(src.tables[table], Entity{PartitionKey: fmt.Sprintf("p%03d", i/100), RowKey: fmt.Sprintf("r%05d", i),
				Props: []Prop{{Name: "V", Type: "Edm.Int32", Value: []byte(fmt.Sprint(i))}}})
		}
	}
	dir, cpPath := t.TempDir(), filepath.Join(t.TempDir(), "copy.checkpoint")
	for run, stop := range []int32{7, 1 << 30} {
		cp, err := OpenCheckpoint(cpPath)
		if err != nil {
			t.Fatal(err)
		}
		dump, err := CreateDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		results, err := Copy(ctx, &stopAfter{Source: src, after: stop, cancel: cancel}, dump, Options{Parallel: 1, Checkpoint: cp})
		cancel()
		if run == 0 {
			if err == nil {
				t.Fatal("the first run was not stopped")
			}
			continue // killed: no Close, no manifest
		}
		if err != nil {
			t.Fatalf("second run: %+v %v", results, err)
		}
		if err := dump.Close(); err != nil {
			t.Fatal(err)
		}
	}
	back, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range back.read.Tables {
		if mt.Entities != 4500 {
			t.Errorf("manifest: %s has %d entities", mt.Name, mt.Entities)
		}
	}
	dst := &memTables{tables: map[string][]Entity{}}
	if _, err := Copy(context.Background(), back, dst, Options{}); err != nil {
		t.Fatal(err)
	}
	for table, want := range src.tables {
		got := dst.tables[table]
		sort.Slice(got, func(i, j int) bool { return got[i].RowKey < got[j].RowKey })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("table %s: %d entities in the dump, want %d once each", table, len(got), len(want))
		}
	}
}

// Key ranges cover every PartitionKey once: below the first bound, between
// bounds, from the last bound on.
func TestKeyRanges(t *testing.T) {
	t.Parallel()
	if got := keyRanges(1); !reflect.DeepEqual(got, []string{""}) {
		t.Errorf("one range: %q", got)
	}
	want := []string{"PartitionKey lt 'F'", "PartitionKey ge 'F' and PartitionKey lt 'V'", "PartitionKey ge 'V' and PartitionKey lt 'k'", "PartitionKey ge 'k'"}
	if got := keyRanges(4); !reflect.DeepEqual(got, want) {
		t.Errorf("four ranges: %q", got)
	}
	if got := keyRanges(1000); len(got) != len(keyAlphabet) {
		t.Errorf("%d ranges of %d characters", len(got), len(keyAlphabet))
	}
}
