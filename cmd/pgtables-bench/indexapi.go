package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/pgtables/pgtables/tableapi"
)

// indexState is what the index API tells of one index.
type indexState struct {
	Property string `json:"property"`
	Type     string `json:"type"`
	State    string `json:"state"` // building, ready or failed
	Error    string `json:"error,omitempty"`
}

// createIndex declares an index on table's property of the EDM type
// through the index API and waits until it is ready.
func createIndex(ctx context.Context, c *tableapi.Client, table, property, edmType string) error {
	body, _ := json.Marshal(map[string]string{"property": property, "type": edmType})
	if _, err := c.Call(ctx, http.MethodPost, indexPath(table), "", nil, body, http.StatusCreated, http.StatusAccepted); err != nil {
		return err
	}
	for {
		r, err := c.Call(ctx, http.MethodGet, indexPath(table), "", nil, nil, http.StatusOK)
		if err != nil {
			return err
		}
		var list struct {
			Indexes []indexState `json:"indexes"`
		}
		if err := json.Unmarshal(r.Body, &list); err != nil {
			return fmt.Errorf("index list: %w", err)
		}
		for _, ix := range list.Indexes {
			if ix.Property != property {
				continue
			}
			switch ix.State {
			case "ready":
				return nil
			case "failed":
				return fmt.Errorf("build failed: %s", ix.Error)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
