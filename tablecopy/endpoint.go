package tablecopy

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pgtables/pgtables/tableapi"
)

// Endpoint is a Table service, as source or destination.
type Endpoint struct {
	c *tableapi.Client
	// Retries bounds the attempts of one request that the service answers
	// with throttling (503, 429) or that fails on the network.
	Retries int
}

// NewEndpoint returns the endpoint of a connection string.
func NewEndpoint(connectionString string) (*Endpoint, error) {
	c, err := tableapi.Dial(connectionString)
	if err != nil {
		return nil, err
	}
	return &Endpoint{c: c, Retries: 12}, nil
}

// call sends a request, and again after a pause while the service
// throttles (503 ServerBusy, 429, 500 OperationTimedOut) or the network
// fails: as long as its Retry-After says, or a doubling backoff with
// jitter.
func (e *Endpoint) call(ctx context.Context, method, path, query string, header map[string]string, body []byte, want ...int) (*tableapi.Response, error) {
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		r, err := e.c.Do(ctx, method, path, query, header, body)
		retry := err != nil && ctx.Err() == nil
		if err == nil {
			for _, s := range want {
				if r.Status == s {
					return r, nil
				}
			}
			code := r.Header.Get("x-ms-error-code")
			retry = r.Status == http.StatusServiceUnavailable || r.Status == http.StatusTooManyRequests ||
				r.Status == http.StatusInternalServerError && code == "OperationTimedOut"
			msg := string(r.Body)
			if len(msg) > 300 {
				msg = msg[:300]
			}
			err = fmt.Errorf("%s %s: status %d (%s): %s", method, path, r.Status, code, msg)
			if s, perr := strconv.Atoi(r.Header.Get("Retry-After")); perr == nil && s >= 0 && retry {
				backoff = time.Duration(s) * time.Second
			}
		}
		if !retry || attempt >= e.Retries {
			return r, err
		}
		pause := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// Tables lists the tables whose names begin with prefix.
func (e *Endpoint) Tables(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	next := ""
	for {
		q := ""
		if next != "" {
			q = "NextTableName=" + url.QueryEscape(next)
		}
		r, err := e.call(ctx, http.MethodGet, "/Tables", q, nil, nil, http.StatusOK)
		if err != nil {
			return nil, err
		}
		var page struct {
			Value []struct{ TableName string } `json:"value"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
		for _, t := range page.Value {
			// Names are case-insensitive, kept as created.
			if strings.HasPrefix(strings.ToLower(t.TableName), strings.ToLower(prefix)) {
				names = append(names, t.TableName)
			}
		}
		if next = r.Header.Get("x-ms-continuation-NextTableName"); next == "" {
			return names, nil
		}
	}
}

// Page reads a page of a table's entities that match filter (empty: all),
// from the continuation token on ("" for the first page), and returns
// the token of the next page, "" after the last.
func (e *Endpoint) Page(ctx context.Context, table, filter, token string) ([]Entity, string, error) {
	q := "$top=1000"
	if filter != "" {
		q += "&$filter=" + url.QueryEscape(filter)
	}
	if token != "" {
		pk, rk, _ := strings.Cut(token, "\n")
		q += "&NextPartitionKey=" + url.QueryEscape(pk)
		if rk != "" {
			q += "&NextRowKey=" + url.QueryEscape(rk)
		}
	}
	r, err := e.call(ctx, http.MethodGet, "/"+url.PathEscape(table)+"()", q,
		map[string]string{"Accept": "application/json;odata=fullmetadata"}, nil, http.StatusOK)
	if err != nil {
		return nil, "", err
	}
	var page struct {
		Value []json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		return nil, "", fmt.Errorf("query %s: %w", table, err)
	}
	entities := make([]Entity, 0, len(page.Value))
	for _, raw := range page.Value {
		ent, err := parseEntity(raw)
		if err != nil {
			return nil, "", fmt.Errorf("query %s: %w", table, err)
		}
		entities = append(entities, ent)
	}
	next := ""
	if pk := r.Header.Get("x-ms-continuation-NextPartitionKey"); pk != "" {
		next = pk + "\n" + r.Header.Get("x-ms-continuation-NextRowKey")
	}
	return entities, next, nil
}

// CreateTable creates a table, unless it exists.
func (e *Endpoint) CreateTable(ctx context.Context, table string) error {
	body, _ := json.Marshal(map[string]string{"TableName": table})
	_, err := e.call(ctx, http.MethodPost, "/Tables", "", map[string]string{"Prefer": "return-no-content"}, body,
		http.StatusCreated, http.StatusNoContent, http.StatusConflict)
	return err
}

// maxBatchBytes keeps a batch's body under the service's 4 MiB.
const maxBatchBytes = 3 << 20

// Write upserts entities of one partition, as entity group transactions of
// at most 100 entities and 3 MiB.
func (e *Endpoint) Write(ctx context.Context, table string, entities []Entity) error {
	for len(entities) > 0 {
		var (
			batch  []Entity
			bodies [][]byte
			size   int
		)
		for len(entities) > 0 && len(bodies) < 100 {
			body, err := entities[0].MarshalJSON()
			if err != nil {
				return err
			}
			if len(bodies) > 0 && size+len(body) > maxBatchBytes {
				break
			}
			batch, bodies = append(batch, entities[0]), append(bodies, body)
			size += len(body) + 512
			entities = entities[1:]
		}
		if err := e.upsertBatch(ctx, table, batch, bodies); err != nil {
			return err
		}
	}
	return nil
}

// upsertBatch sends one entity group transaction of InsertOrReplace
// operations, one per body.
func (e *Endpoint) upsertBatch(ctx context.Context, table string, batch []Entity, bodies [][]byte) error {
	ops := make([]tableapi.BatchOp, len(bodies))
	for i, body := range bodies {
		ops[i] = tableapi.BatchOp{Method: http.MethodPut, Path: tableapi.EntityPath(table, batch[i].PartitionKey, batch[i].RowKey), Body: body}
	}
	body, header := e.c.BatchRequest(ops)
	r, err := e.call(ctx, http.MethodPost, "/$batch", "", header, body, http.StatusAccepted)
	if err == nil {
		err = tableapi.BatchError(r, len(ops))
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", table, err)
	}
	return nil
}
