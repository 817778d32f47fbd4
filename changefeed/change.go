package changefeed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Operations of a change.
const (
	OpInsert  = "insert"  // the entity did not exist before the write
	OpReplace = "replace" // Update or InsertOrReplace of an existing entity
	OpMerge   = "merge"   // Merge or InsertOrMerge of an existing entity
	OpDelete  = "delete"
)

// Change is one committed change of an entity, as the feed sends it.
type Change struct {
	// Cursor resumes the feed after this change.
	Cursor string `json:"cursor"`
	// Op is OpInsert, OpReplace, OpMerge or OpDelete.
	Op string `json:"op"`
	// Txn is shared by the changes of one transaction, such as an entity
	// group transaction's.
	Txn          string    `json:"txn"`
	PartitionKey string    `json:"PartitionKey"`
	RowKey       string    `json:"RowKey"`
	Timestamp    time.Time `json:"Timestamp"`
	// ETag is what the write answered; "" for a delete.
	ETag string `json:"etag"`
	// Entity is the entity after the change in Azure's JSON with type
	// annotations (Age@odata.type and the like); nil for a delete.
	Entity json.RawMessage `json:"entity"`
	// Raw is the change's JSON as the server sent it.
	Raw json.RawMessage `json:"-"`
}

// Page is one answer of the feed.
type Page struct {
	Changes []Change
	// Cursor resumes the feed after the page: the last change's cursor,
	// or the request's cursor made concrete when there are none.
	Cursor string
}

// errPage tells that a body is not a page of the feed.
var errPage = errors.New("change feed page")

// ParsePage decodes and checks a 200 answer's body: every change with a
// cursor, a transaction, a known operation and an entity unless deleted;
// the page's cursor that of its last change.
func ParsePage(body []byte) (Page, error) {
	var raw struct {
		Changes []json.RawMessage `json:"changes"`
		Cursor  *string           `json:"cursor"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Page{}, fmt.Errorf("%w: %v", errPage, err)
	}
	if raw.Cursor == nil || *raw.Cursor == "" {
		return Page{}, fmt.Errorf("%w: no cursor", errPage)
	}
	p := Page{Cursor: *raw.Cursor, Changes: make([]Change, len(raw.Changes))}
	for i, r := range raw.Changes {
		c := &p.Changes[i]
		if err := json.Unmarshal(r, c); err != nil {
			return Page{}, fmt.Errorf("%w: change %d: %v", errPage, i, err)
		}
		if bytes.Equal(c.Entity, []byte("null")) {
			c.Entity = nil
		}
		c.Raw = r
		if err := c.check(); err != nil {
			return Page{}, fmt.Errorf("%w: change %d: %v", errPage, i, err)
		}
	}
	if n := len(p.Changes); n > 0 && p.Changes[n-1].Cursor != p.Cursor {
		return Page{}, fmt.Errorf("%w: its cursor is not its last change's", errPage)
	}
	return p, nil
}

func (c *Change) check() error {
	switch {
	case c.Cursor == "":
		return errors.New("no cursor")
	case c.Txn == "":
		return errors.New("no txn")
	}
	switch c.Op {
	case OpInsert, OpReplace, OpMerge:
		if len(c.Entity) == 0 || c.Entity[0] != '{' {
			return fmt.Errorf("%s without an entity", c.Op)
		}
	case OpDelete:
		if c.Entity != nil {
			return errors.New("delete with an entity")
		}
	default:
		return fmt.Errorf("op %q", c.Op)
	}
	return nil
}

// transactions splits changes into runs of one transaction each, in order.
func transactions(changes []Change) [][]Change {
	var out [][]Change
	for i := 0; i < len(changes); {
		j := i + 1
		for j < len(changes) && changes[j].Txn == changes[i].Txn {
			j++
		}
		out = append(out, changes[i:j:j])
		i = j
	}
	return out
}
