package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pgtables/pgtables/tableapi"
)

// Cursors that name a place rather than a change.
const (
	Now    = "now"    // only changes committed after the request
	Oldest = "oldest" // the oldest change retained
)

// MaxWait is the longest long-poll a request asks for: the server holds
// it up to 60 s, and tableapi's connections give an answer that long.
const MaxWait = 50 * time.Second

// Errors a Read or Follow stops with, which errors.Is finds in an *Error.
var (
	// ErrCursorExpired: the cursor is older than the feed's retention;
	// Error.OldestCursor is where the feed begins now.
	ErrCursorExpired = errors.New("change feed cursor expired")
	// ErrTableNotFound: there is no such table, or it was deleted, which
	// ends its feed.
	ErrTableNotFound = errors.New("table not found")
	// ErrDisabled: the change feed is off for the account.
	ErrDisabled = errors.New("change feed disabled")
)

// Error is an answer of the feed other than 200.
type Error struct {
	Status  int
	Code    string // x-ms-error-code
	Message string
	// OldestCursor is the oldest retained change's cursor, with a 410.
	OldestCursor string
}

func (e *Error) Error() string {
	return fmt.Sprintf("change feed: status %d (%s): %s", e.Status, e.Code, e.Message)
}

// Is matches the sentinel errors by status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrCursorExpired:
		return e.Status == http.StatusGone
	case ErrTableNotFound:
		return e.Status == http.StatusNotFound
	case ErrDisabled:
		return e.Status == http.StatusConflict
	}
	return false
}

// Temporary reports whether a later try may succeed: the server's own
// failures and overload, not what it refuses.
func (e *Error) Temporary() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
}

// Client reads one table's feed.
type Client struct {
	api   *tableapi.Client
	table string
}

// NewClient returns a client of table's feed through api (its signing, SAS
// or key, and its connections).
func NewClient(api *tableapi.Client, table string) *Client {
	return &Client{api: api, table: table}
}

// Read asks once for the changes after cursor (Now, Oldest or a change's
// cursor): up to limit of them (0: the server's default), waiting up to
// wait (at most MaxWait) for one when there is none yet. An answer other
// than 200 is an *Error; a failure to reach the server is returned as is.
func (c *Client) Read(ctx context.Context, cursor string, limit int, wait time.Duration) (Page, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > MaxWait {
		wait = MaxWait
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	r, err := c.api.Changes(ctx, c.table, q.Encode())
	if err != nil {
		return Page{}, err
	}
	if r.Status != http.StatusOK {
		return Page{}, errorOf(r)
	}
	return ParsePage(r.Body)
}

// errorOf reads Azure's error of an answer: the code from the header or
// the body, the message from the body.
func errorOf(r *tableapi.Response) *Error {
	e := &Error{Status: r.Status, Code: r.Header.Get("x-ms-error-code"), OldestCursor: r.Header.Get("x-pgtables-oldest-cursor")}
	var body struct {
		Err struct {
			Code    string `json:"code"`
			Message struct {
				Value string `json:"value"`
			} `json:"message"`
		} `json:"odata.error"`
	}
	if json.Unmarshal(r.Body, &body) == nil {
		e.Message = body.Err.Message.Value
		if e.Code == "" {
			e.Code = body.Err.Code
		}
	} else {
		e.Message = string(r.Body)
		if len(e.Message) > 300 {
			e.Message = e.Message[:300]
		}
	}
	return e
}
