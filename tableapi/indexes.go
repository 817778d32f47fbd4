package tableapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Index is a property index of a pgtables table, as its index API
// (/-/accounts/{account}/tables/{table}/indexes) describes it.
type Index struct {
	Name              string         `json:"name"`
	Table             string         `json:"table"`
	Property          string         `json:"property"`
	Type              string         `json:"type"` // Edm.Int32, ...
	AfterPartitionKey bool           `json:"afterPartitionKey"`
	State             string         `json:"state"` // building, ready or failed
	Error             string         `json:"error,omitempty"`
	Created           time.Time      `json:"created"`
	Progress          *IndexProgress `json:"progress,omitempty"`
}

// IndexProgress is where a build is.
type IndexProgress struct {
	Phase       string `json:"phase"`
	BlocksDone  int64  `json:"blocksDone"`
	BlocksTotal int64  `json:"blocksTotal"`
	TuplesDone  int64  `json:"tuplesDone"`
	TuplesTotal int64  `json:"tuplesTotal"`
}

// IndexSpec is what to index: a property, its EDM type, and whether the
// index is ordered by PartitionKey first.
type IndexSpec struct {
	Property          string `json:"property"`
	Type              string `json:"type"`
	AfterPartitionKey bool   `json:"afterPartitionKey"`
}

func (c *Client) indexesPath(table string) string {
	return "/-/accounts/" + url.PathEscape(c.account) + "/tables/" + url.PathEscape(table) + "/indexes"
}

// CreateIndex declares an index on table (pgtables only). It returns at
// once, the index building; Indexes tells when it is ready.
func (c *Client) CreateIndex(ctx context.Context, table string, spec IndexSpec) (Index, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return Index{}, err
	}
	r, err := expect(c.doAt(ctx, http.MethodPost, c.indexesPath(table), "", nil, body))(http.StatusAccepted)
	if err != nil {
		return Index{}, fmt.Errorf("create index: %w", err)
	}
	var ix Index
	if err := json.Unmarshal(r.Body, &ix); err != nil {
		return Index{}, fmt.Errorf("create index: %w", err)
	}
	return ix, nil
}

// Indexes lists the indexes of table (pgtables only).
func (c *Client) Indexes(ctx context.Context, table string) ([]Index, error) {
	r, err := expect(c.doAt(ctx, http.MethodGet, c.indexesPath(table), "", nil, nil))(http.StatusOK)
	if err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	var list struct {
		Value []Index `json:"value"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	return list.Value, nil
}

// DropIndex drops index name of table (pgtables only).
func (c *Client) DropIndex(ctx context.Context, table, name string) error {
	if _, err := expect(c.doAt(ctx, http.MethodDelete, c.indexesPath(table)+"/"+url.PathEscape(name), "", nil, nil))(http.StatusNoContent); err != nil {
		return fmt.Errorf("drop index: %w", err)
	}
	return nil
}
