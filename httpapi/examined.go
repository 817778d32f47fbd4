package httpapi

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pgtables/pgtables/odata/filter"
	"github.com/pgtables/pgtables/store"
)

// DefaultScanLogRows is Config.ScanLogRows's default.
const DefaultScanLogRows = 10_000

// Headers of a query page whose rows examined were counted: how many, and,
// when they were many for what the page returned, the properties of the
// filter that an index could serve (comma-separated). The console shows
// the hint beside the query.
const (
	headerExamined  = "x-pgtables-rows-examined"
	headerIndexHint = "x-pgtables-index-hint"
)

// Values of the shape label of pgtables_query_rows_examined.
const (
	shapePartition = "partition" // the filter pins one PartitionKey
	shapeTable     = "table"     // across partitions
)

// observeExamined counts the rows a query page examined, and when they
// were many to return few, logs the query with the properties of its
// filter that an index would serve and tells the client the same.
func (rq *request) observeExamined(f *filter.Expr, page *store.EntityPage) {
	if !page.Counted {
		return
	}
	shape := shapeTable
	if _, ok := filter.Partition(f, "PartitionKey"); ok {
		shape = shapePartition
	}
	rq.srv.ops.metrics.examined.WithLabelValues(shape).Observe(float64(page.Examined))
	h := rq.header()
	setRaw(h, headerExamined, strconv.FormatInt(page.Examined, 10))
	limit := rq.srv.cfg.ScanLogRows
	if limit < 0 || page.Examined < int64(limit) || int64(len(page.Entities))*100 > page.Examined {
		return
	}
	props := filterProperties(f)
	if len(props) == 0 {
		return
	}
	setRaw(h, headerIndexHint, strings.Join(props, ","))
	rq.srv.log.Info("query examined many rows to return few: an index on a property of its filter would serve it",
		"request_id", rq.id, "account", rq.t.account, "table", rq.t.table, "shape", shape,
		"rows_examined", page.Examined, "rows_returned", len(page.Entities), "properties", props)
}

// filterProperties returns the properties that f compares, other than the
// keys and Timestamp, in order of first appearance: the candidates for a
// property index.
func filterProperties(f *filter.Expr) []string {
	var out []string
	var walk func(e *filter.Expr)
	walk = func(e *filter.Expr) {
		if e == nil {
			return
		}
		switch e.Name {
		case "", "PartitionKey", "RowKey", "Timestamp":
		default:
			if !slices.Contains(out, e.Name) {
				out = append(out, e.Name)
			}
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	walk(f)
	return out
}
