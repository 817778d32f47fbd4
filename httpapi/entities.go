package httpapi

import (
	"net/http"
	"net/url"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// urlKeys validates the keys addressed by the URL, which are authoritative
// for every operation on one entity.
func (rq *request) urlKeys() error {
	if err := odata.ValidateKey("PartitionKey", rq.t.pk); err != nil {
		return err
	}
	return odata.ValidateKey("RowKey", rq.t.rk)
}

func (rq *request) insertEntity() error {
	body, err := rq.readJSONBody()
	if err != nil {
		return err
	}
	eb, err := odata.DecodeEntity(body)
	if err != nil {
		return err
	}
	if !eb.HasPartitionKey || !eb.HasRowKey {
		return odata.ErrPropertiesNeedValue
	}
	if err := rq.authorizeKeys(eb.PartitionKey, eb.RowKey); err != nil {
		return err
	}
	if err := odata.CheckEntity(eb.PartitionKey, eb.RowKey, eb.Properties); err != nil {
		return err
	}
	w := store.Write{Op: store.OpInsert, PartitionKey: eb.PartitionKey, RowKey: eb.RowKey, Properties: eb.Properties}
	res, err := rq.srv.store.Write(rq.r().Context(), rq.t.account, rq.t.table, &w)
	if err != nil {
		return err
	}
	enc := rq.encoder(rq.t.table)
	rq.setHeader("ETag", res.ETag)
	e := odata.Entity{PartitionKey: eb.PartitionKey, RowKey: eb.RowKey, Timestamp: res.Timestamp, ETag: res.ETag, Properties: eb.Properties}
	return rq.created(enc.ServiceURL+"/"+odata.EntityPath(rq.t.table, eb.PartitionKey, eb.RowKey),
		func(b []byte) []byte { return enc.AppendEntity(b, &e) })
}

// updateEntity is Update (replace) or Merge with If-Match, and Insert Or
// Replace or Insert Or Merge without it. Keys in the body are ignored: the
// URL's are authoritative (and Go's EDMEntity doubles quotes in them).
func (rq *request) updateEntity(op store.Op) error {
	if err := rq.urlKeys(); err != nil {
		return err
	}
	match, err := store.ParseMatch(rq.r().Header.Values("If-Match"))
	if err != nil {
		return err
	}
	body, err := rq.readJSONBody()
	if err != nil {
		return err
	}
	eb, err := odata.DecodeEntity(body)
	if err != nil {
		return err
	}
	if err := odata.CheckEntity(rq.t.pk, rq.t.rk, eb.Properties); err != nil {
		return err
	}
	w := store.Write{Op: op, PartitionKey: rq.t.pk, RowKey: rq.t.rk, Properties: eb.Properties, Match: match}
	res, err := rq.srv.store.Write(rq.r().Context(), rq.t.account, rq.t.table, &w)
	if err != nil {
		return err
	}
	rq.setHeader("ETag", res.ETag)
	return rq.writeNoContent(http.StatusNoContent)
}

func (rq *request) deleteEntity() error {
	if err := rq.urlKeys(); err != nil {
		return err
	}
	h := rq.r().Header.Values("If-Match")
	if h == nil {
		return errDeleteNeedsMatch
	}
	match, err := store.ParseMatch(h)
	if err != nil {
		return err
	}
	w := store.Write{Op: store.OpDelete, PartitionKey: rq.t.pk, RowKey: rq.t.rk, Match: match}
	if _, err := rq.srv.store.Write(rq.r().Context(), rq.t.account, rq.t.table, &w); err != nil {
		return err
	}
	return rq.writeNoContent(http.StatusNoContent)
}

func (rq *request) getEntity() error {
	if err := rq.urlKeys(); err != nil {
		return err
	}
	enc := rq.encoder(rq.t.table)
	var err error
	if enc.Select, err = odata.ParseSelect(rq.query.Get("$select")); err != nil {
		return err
	}
	e, err := rq.srv.store.GetEntity(rq.r().Context(), rq.t.account, rq.t.table, rq.t.pk, rq.t.rk)
	if err != nil {
		return err
	}
	rq.setHeader("ETag", e.ETag)
	return rq.writeBody(http.StatusOK, func(b []byte) []byte { return enc.AppendEntity(b, e) })
}

func (rq *request) queryEntities() error {
	q, sel, err := entityQuery(rq.query)
	if err != nil {
		return err
	}
	rq.clipQuery(&q)
	enc := rq.encoder(rq.t.table)
	enc.Select = sel
	q.Encode = enc.AppendEntityObject
	page, err := rq.srv.store.QueryEntities(rq.r().Context(), rq.t.account, rq.t.table, q)
	if err != nil {
		return err
	}
	rq.srv.ops.metrics.returned.Observe(float64(len(page.Entities)))
	rq.observeExamined(q.Filter, page)
	setContinuation(rq.header(), page)
	return rq.writeBody(http.StatusOK, func(b []byte) []byte { return enc.AppendEntities(b, page.Entities) })
}

// entityQuery reads the options of Query Entities: $filter, $top, $select
// and the continuation, refusing the OData options the service lacks.
func entityQuery(query url.Values) (store.EntityQuery, []string, error) {
	var q store.EntityQuery
	if err := checkQueryOptions(query); err != nil {
		return q, nil, err
	}
	var err error
	if q.Filter, err = parseFilter(query); err != nil {
		return q, nil, err
	}
	if q.Top, err = parseTop(query); err != nil {
		return q, nil, err
	}
	if tok := query.Get("NextPartitionKey"); tok != "" {
		if q.FromPK, err = odata.DecodeContinuation(tok); err != nil {
			return q, nil, err
		}
		q.HasFromPK = true
		if tok := query.Get("NextRowKey"); tok != "" {
			if q.FromRK, err = odata.DecodeContinuation(tok); err != nil {
				return q, nil, err
			}
			q.HasFromRK = true
		}
	}
	sel, err := odata.ParseSelect(query.Get("$select"))
	if err != nil {
		return q, nil, err
	}
	// Every entity of the page writes every selected name, present or not:
	// a long $select makes a page of small entities large. Keep the page's
	// selected part within selectPageBytes; the page ends early with a
	// continuation instead, as pages may.
	if n := selectCost(sel); n > 0 && q.Top > selectPageBytes/n {
		q.Top = max(1, selectPageBytes/n)
	}
	return q, sel, nil
}

// selectPageBytes bounds what the $select list alone adds to a page.
const selectPageBytes = 8 << 20

func selectCost(sel []string) int {
	n := 0
	for _, name := range sel {
		n += len(name) + 8 // "name":null,
	}
	return n
}

// setContinuation writes the continuation headers of a page that has more.
func setContinuation(h http.Header, page *store.EntityPage) {
	if page.More {
		setRaw(h, "x-ms-continuation-NextPartitionKey", odata.EncodeContinuation(page.NextPK))
		setRaw(h, "x-ms-continuation-NextRowKey", odata.EncodeContinuation(page.NextRK))
	}
}
