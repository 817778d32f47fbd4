package tableapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// Account is the account the client works in: the one it signs as, or,
// for a client with a shared access signature, the one its endpoint names
// (the first path segment of a path-style endpoint, else the first label
// of the host), which pgtables' own API under /-/ needs in its paths.
func (c *Client) Account() string {
	if c.account != "" {
		return c.account
	}
	u, err := url.Parse(c.endpoint)
	if err != nil {
		return ""
	}
	if seg, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/"); seg != "" {
		return seg
	}
	name, _, _ := strings.Cut(u.Hostname(), ".")
	return name
}

// Changes reads one page of table's change feed (pgtables only): query is
// the request's raw query (cursor=...&limit=...&wait=...). The response is
// returned whatever its status, for the caller to tell a cursor that
// expired from a server that is down.
func (c *Client) Changes(ctx context.Context, table, query string) (*Response, error) {
	path := "/-/accounts/" + url.PathEscape(c.Account()) + "/tables/" + url.PathEscape(table) + "/changes"
	return c.doAt(ctx, http.MethodGet, path, query, map[string]string{"Accept": "application/json"}, nil)
}
