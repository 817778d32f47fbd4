package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/odata/filter"
	"github.com/pgtables/pgtables/store"
)

func (rq *request) createTable() error {
	body, err := rq.readJSONBody()
	if err != nil {
		return err
	}
	name, err := odata.DecodeTableName(body)
	if err != nil {
		return err
	}
	if err := odata.ValidateTableName(name); err != nil {
		return err
	}
	if err := rq.authorizeTable(authCreateTable, name); err != nil {
		return err
	}
	if err := rq.srv.store.CreateTable(rq.r().Context(), rq.t.account, name); err != nil {
		return err
	}
	enc := rq.encoder("")
	return rq.created(enc.ServiceURL+"/Tables('"+name+"')", func(b []byte) []byte { return enc.AppendTable(b, name) })
}

func (rq *request) deleteTable() error {
	err := rq.srv.store.DeleteTable(rq.r().Context(), rq.t.account, rq.t.table)
	if errors.Is(err, store.ErrTableNotFound) {
		// The table is the resource here: Azure answers ResourceNotFound,
		// which the .NET and Python SDKs rely on to make delete idempotent.
		return errResourceNotFound
	}
	if err != nil {
		return err
	}
	return rq.writeNoContent(http.StatusNoContent)
}

func (rq *request) getTable() error {
	ctx := rq.r().Context()
	page, err := rq.srv.store.QueryTables(ctx, rq.t.account, store.TableQuery{Top: 1, From: strings.ToLower(rq.t.table)})
	if err != nil {
		return err
	}
	if len(page.Names) == 0 || !strings.EqualFold(page.Names[0], rq.t.table) {
		return errResourceNotFound
	}
	return rq.writeJSON(http.StatusOK, rq.encoder("").AppendTable(nil, page.Names[0]))
}

func (rq *request) queryTables() error {
	if err := checkQueryOptions(rq.query); err != nil {
		return err
	}
	q := store.TableQuery{Top: 1000}
	var err error
	if q.Filter, err = parseFilter(rq.query); err != nil {
		return err
	}
	if q.Top, err = parseTop(rq.query); err != nil {
		return err
	}
	if tok := rq.query.Get("NextTableName"); tok != "" {
		if q.From, err = odata.DecodeContinuation(tok); err != nil {
			return err
		}
		// Listing order is the lower-cased name; a token from another
		// server may name the table in any case.
		q.From = strings.ToLower(q.From)
	}
	enc := rq.encoder("")
	if enc.Select, err = odata.ParseSelect(rq.query.Get("$select")); err != nil {
		return err
	}
	page, err := rq.srv.store.QueryTables(rq.r().Context(), rq.t.account, q)
	if err != nil {
		return err
	}
	if page.Next != "" {
		setRaw(rq.header(), "x-ms-continuation-NextTableName", odata.EncodeContinuation(page.Next))
	}
	return rq.writeBody(http.StatusOK, func(b []byte) []byte { return enc.AppendTables(b, page.Names) })
}

// parseFilter parses $filter. An empty filter means none, and so does one
// of whitespace only: the grammar allows whitespace around every filter, so
// that is the empty filter too (Azure accepts an empty $filter).
func parseFilter(q map[string][]string) (*filter.Expr, error) {
	vals := q["$filter"]
	if len(vals) == 0 || strings.Trim(vals[0], " \t\r\n") == "" {
		return nil, nil
	}
	return filter.Parse(vals[0])
}

// parseTop parses $top; absent means the maximum page of 1000.
func parseTop(q map[string][]string) (int, error) {
	vals := q["$top"]
	if len(vals) == 0 {
		return 1000, nil
	}
	return odata.ParseTop(vals[0])
}
