package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pgtables/pgtables/tableapi"
)

// createIndex declares an index on table's property of the EDM type
// through the index API and waits until it is ready.
func createIndex(ctx context.Context, c *tableapi.Client, table, property, edmType string) error {
	ix, err := c.CreateIndex(ctx, table, tableapi.IndexSpec{Property: property, Type: "Edm." + edmType})
	if err != nil {
		return err
	}
	for {
		list, err := c.Indexes(ctx, table)
		if err != nil {
			return err
		}
		found := false
		for _, got := range list {
			if got.Name != ix.Name {
				continue
			}
			found = true
			switch got.State {
			case "ready":
				return nil
			case "failed":
				return fmt.Errorf("build failed: %s", got.Error)
			}
		}
		if !found {
			return fmt.Errorf("index %s is not listed", ix.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
