package tableapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// Property indexes are a pgtables extension: its index API answers at the
// server's root, /-/accounts/{account}/tables/{table}/indexes, signed with
// the account's key like any request (a SAS cannot use it). Other
// endpoints answer it with an error.

// Index is a declared property index as the index API reports it.
type Index struct {
	Name              string         `json:"name,omitempty"`
	Property          string         `json:"property"`
	Type              string         `json:"type"` // Edm.Int32, ...
	AfterPartitionKey bool           `json:"afterPartitionKey"`
	State             string         `json:"state,omitempty"` // building, ready or failed
	Error             string         `json:"error,omitempty"`
	Progress          *IndexProgress `json:"progress,omitempty"`
}

// IndexProgress is how far a build is, when the server knows.
type IndexProgress struct {
	Phase       string `json:"phase"`
	BlocksDone  int64  `json:"blocksDone"`
	BlocksTotal int64  `json:"blocksTotal"`
	TuplesDone  int64  `json:"tuplesDone"`
	TuplesTotal int64  `json:"tuplesTotal"`
}

func (c *Client) indexPath(table string) string {
	return "/-/accounts/" + url.PathEscape(c.account) + "/tables/" + url.PathEscape(table) + "/indexes"
}

// Indexes lists the indexes of table.
func (c *Client) Indexes(ctx context.Context, table string) ([]Index, error) {
	r, err := c.callRoot(ctx, http.MethodGet, c.indexPath(table), nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var list struct {
		Value []Index `json:"value"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		return nil, fmt.Errorf("indexes of %s: %w", table, err)
	}
	return list.Value, nil
}

// CreateIndex declares an index on table (its Property, Type and
// AfterPartitionKey) and returns it as declared, building.
func (c *Client) CreateIndex(ctx context.Context, table string, ix Index) (Index, error) {
	body, err := json.Marshal(Index{Property: ix.Property, Type: ix.Type, AfterPartitionKey: ix.AfterPartitionKey})
	if err != nil {
		return Index{}, err
	}
	r, err := c.callRoot(ctx, http.MethodPost, c.indexPath(table), body, http.StatusAccepted, http.StatusCreated)
	if err != nil {
		return Index{}, err
	}
	var out Index
	if err := json.Unmarshal(r.Body, &out); err != nil {
		return Index{}, fmt.Errorf("index on %s: %w", ix.Property, err)
	}
	return out, nil
}

// DropIndex drops the index name of table.
func (c *Client) DropIndex(ctx context.Context, table, name string) error {
	_, err := c.callRoot(ctx, http.MethodDelete, c.indexPath(table)+"/"+url.PathEscape(name), nil, http.StatusNoContent)
	return err
}

// callRoot is Call for a path at the server's root.
func (c *Client) callRoot(ctx context.Context, method, path string, body []byte, want ...int) (*Response, error) {
	r, err := c.do(ctx, method, "", path, "", nil, body)
	if err != nil {
		return nil, err
	}
	return checkStatus(r, want)
}
