package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
	"github.com/pgtables/pgtables/tableapi"
)

// The property index API, an extension of pgtables under /-/, in JSON:
//
//	GET    /-/accounts/{account}/tables/{table}/indexes         the table's indexes
//	POST   /-/accounts/{account}/tables/{table}/indexes         {"property": "Age", "type": "Edm.Int32", "afterPartitionKey": false}
//	DELETE /-/accounts/{account}/tables/{table}/indexes/{name}
//
// A request is authenticated as every request of the account is: Shared
// Key (Lite), signed over "/" + account + the path as sent, or a bearer
// token with the manage permission on the table. A shared access signature
// cannot authorize it. Errors are Azure's: status, x-ms-error-code and a
// JSON body.
const indexesPrefix = "/-/accounts/"

// toIndexJSON is ix on the wire, in the types of the one client of the
// API (tableapi), so that both ends read the same JSON.
func toIndexJSON(ix store.Index) tableapi.Index {
	out := tableapi.Index{
		Name: ix.Name, Table: ix.Table, Property: ix.Property, Type: ix.Type.String(),
		AfterPartitionKey: ix.AfterPartitionKey, State: ix.State, Error: ix.Error, Created: ix.Created.UTC(),
	}
	if p := ix.Progress; p != nil {
		out.Progress = &tableapi.IndexProgress{Phase: p.Phase, BlocksDone: p.BlocksDone, BlocksTotal: p.BlocksTotal, TuplesDone: p.TuplesDone, TuplesTotal: p.TuplesTotal}
	}
	return out
}

// indexPath is what an index API path names.
type indexPath struct {
	account, table, name string
	hasName              bool
}

// parseIndexPath parses the raw path of an index API request.
func parseIndexPath(rawPath string) (indexPath, bool) {
	rest, ok := strings.CutPrefix(rawPath, indexesPrefix)
	if !ok {
		return indexPath{}, false
	}
	segs := strings.Split(rest, "/")
	if (len(segs) != 4 && len(segs) != 5) || segs[1] != "tables" || segs[3] != "indexes" {
		return indexPath{}, false
	}
	var p indexPath
	for i, dst := range []*string{&p.account, nil, &p.table, nil, &p.name} {
		if dst == nil || i >= len(segs) {
			continue
		}
		v, err := url.PathUnescape(segs[i])
		if err != nil || v == "" {
			return indexPath{}, false
		}
		*dst = v
	}
	p.hasName = len(segs) == 5
	return p, true
}

// serveIndexes answers a request of the index API.
func (s *Server) serveIndexes(c echo.Context) error {
	rq := &request{srv: s, c: c, id: newRequestID(), format: odata.MinimalMetadata}
	defer rq.recoverPanic()
	r := c.Request()
	rq.commonHeaders()
	rawPath, rawQuery := splitRequestTarget(r.RequestURI)
	p, ok := parseIndexPath(rawPath)
	switch {
	case !ok:
		rq.fail(errResourceNotFound)
		return nil
	case !s.serving.Load():
		rq.fail(odata.Detailf(store.ErrUnavailable, "The service is starting and its database is not ready yet."))
		return nil
	}
	allowed := []string{http.MethodGet, http.MethodPost}
	if p.hasName {
		allowed = []string{http.MethodDelete}
	}
	if !slices.Contains(allowed, r.Method) {
		rq.header().Set("Allow", strings.Join(allowed, ", "))
		rq.fail(errMethodNotAllowed)
		return nil
	}
	if err := rq.authorizeExtension(p.account, p.table, rawPath, rawQuery, authManageIndexes); err != nil {
		rq.fail(err)
		return nil
	}
	if err := rq.indexOperation(p); err != nil {
		rq.fail(err)
	}
	return nil
}

// authorizeExtension authenticates a request of an API under /-/ on a
// table of account, and authorizes op on that table.
func (rq *request) authorizeExtension(account, table, rawPath, rawQuery string, op authOp) error {
	rq.t = &target{account: account, pathStyle: true, rawPath: rawPath, rawQuery: rawQuery, table: table}
	var err error
	if rq.query, err = parseQuery(rawQuery); err != nil {
		return odata.Detailf(errInvalidQueryParam, "The query string is not well formed.")
	}
	if rq.acct = rq.srv.cfg.Accounts[account]; rq.acct == nil {
		return authFailed("The account %q does not exist.", account)
	}
	if rq.grant, err = rq.srv.authenticateRequest(rq); err != nil {
		return err
	}
	return rq.authorizeTable(op, table)
}

// indexOperation runs an authenticated request of the index API.
func (rq *request) indexOperation(p indexPath) error {
	ctx := rq.r().Context()
	st := rq.srv.store
	switch {
	case p.hasName:
		if err := st.DropIndex(ctx, p.account, p.table, p.name); err != nil {
			return err
		}
		return rq.writeNoContent(http.StatusNoContent)
	case rq.r().Method == http.MethodGet:
		ixs, err := st.Indexes(ctx, p.account, p.table)
		if err != nil {
			return err
		}
		out := struct {
			Value []tableapi.Index `json:"value"`
		}{Value: make([]tableapi.Index, 0, len(ixs))}
		for _, ix := range ixs {
			out.Value = append(out.Value, toIndexJSON(ix))
		}
		return rq.writeIndexJSON(http.StatusOK, out)
	}
	body, err := rq.readJSONBody()
	if err != nil {
		return err
	}
	var in tableapi.IndexSpec
	if err := json.Unmarshal(body, &in); err != nil {
		return odata.Detailf(odata.ErrInvalidInput, "The body is not an index: %s.", odata.Truncate(err.Error(), 200))
	}
	typ, ok := odata.ParseEdmType(in.Type)
	if !ok {
		return odata.Detailf(store.ErrIndexType, "The type '%s' is not an EDM type such as Edm.Int32.", odata.Truncate(in.Type, 100))
	}
	ix, err := st.CreateIndex(ctx, p.account, p.table, store.IndexSpec{Property: in.Property, Type: typ, AfterPartitionKey: in.AfterPartitionKey})
	if err != nil {
		return err
	}
	// Accepted: the build goes on after the answer.
	rq.header().Set("Location", indexesPrefix+url.PathEscape(p.account)+"/tables/"+url.PathEscape(p.table)+"/indexes/"+ix.Name)
	return rq.writeIndexJSON(http.StatusAccepted, toIndexJSON(ix))
}

// writeIndexJSON sends v as plain JSON (not OData).
func (rq *request) writeIndexJSON(status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %w", errInternal, err)
	}
	return rq.c.Blob(status, "application/json", b)
}
