package tablecopy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pgtables/pgtables/tableapi"
)

// Property index definitions, a pgtables extension, are copied with
// Options.Indexes: from a pgtables endpoint or a dump, to a pgtables
// endpoint (whose builds go on after the copy) or a dump. Only what an
// index is goes: its property, type and ordering.
type (
	indexSource interface {
		Indexes(ctx context.Context, table string) ([]tableapi.Index, error)
	}
	indexDestination interface {
		// SetIndexes declares those of indexes the table lacks.
		SetIndexes(ctx context.Context, table string, indexes []tableapi.Index) error
	}
)

// copyIndexes copies a table's index definitions.
func copyIndexes(ctx context.Context, src Source, dst Destination, table string) error {
	s, ok1 := src.(indexSource)
	d, ok2 := dst.(indexDestination)
	if !ok1 || !ok2 {
		return errors.New("indexes: the source or the destination holds none")
	}
	ixs, err := s.Indexes(ctx, table)
	if err != nil || len(ixs) == 0 {
		return err
	}
	return d.SetIndexes(ctx, table, ixs)
}

// sameIndex reports whether a and b serve the same comparisons.
func sameIndex(a, b tableapi.Index) bool {
	return a.Property == b.Property && a.Type == b.Type && a.AfterPartitionKey == b.AfterPartitionKey
}

// definition is what of an index a copy keeps.
func definition(ix tableapi.Index) tableapi.IndexSpec {
	return tableapi.IndexSpec{Property: ix.Property, Type: ix.Type, AfterPartitionKey: ix.AfterPartitionKey}
}

// Indexes reads the index definitions of a table through the index API.
func (e *Endpoint) Indexes(ctx context.Context, table string) ([]tableapi.Index, error) {
	ixs, err := e.c.Indexes(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("indexes of %s: %w", table, err)
	}
	return ixs, nil
}

// SetIndexes declares the indexes that the table lacks; their builds go
// on after it returns.
func (e *Endpoint) SetIndexes(ctx context.Context, table string, indexes []tableapi.Index) error {
	have, err := e.Indexes(ctx, table)
	if err != nil {
		return err
	}
	for _, ix := range indexes {
		found := false
		for _, h := range have {
			found = found || sameIndex(h, ix)
		}
		if found {
			continue
		}
		if _, err := e.c.CreateIndex(ctx, table, definition(ix)); err != nil {
			return fmt.Errorf("index on %s of %s: %w", ix.Property, table, err)
		}
	}
	return nil
}

// A dump keeps a table's index definitions beside its entities, as JSON.
func indexesFile(table string) string { return table + ".indexes.json" }

// Indexes reads a table's index definitions from the dump, none when it
// holds none.
func (d *Dir) Indexes(_ context.Context, table string) ([]tableapi.Index, error) {
	b, err := readOptional(filepath.Join(d.path, indexesFile(table)))
	if err != nil || b == nil {
		return nil, err
	}
	var defs []tableapi.IndexSpec
	if err := json.Unmarshal(b, &defs); err != nil {
		return nil, fmt.Errorf("%s: %w", indexesFile(table), err)
	}
	ixs := make([]tableapi.Index, len(defs))
	for i, d := range defs {
		ixs[i] = tableapi.Index{Property: d.Property, Type: d.Type, AfterPartitionKey: d.AfterPartitionKey}
	}
	return ixs, nil
}

// SetIndexes writes a table's index definitions into the dump.
func (d *Dir) SetIndexes(_ context.Context, table string, indexes []tableapi.Index) error {
	defs := make([]tableapi.IndexSpec, len(indexes))
	for i, ix := range indexes {
		defs[i] = definition(ix)
	}
	b, err := json.MarshalIndent(defs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d.path, indexesFile(table)), append(b, '\n'), 0o644)
}
