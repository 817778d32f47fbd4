package main

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/pgtables/pgtables/odata"
)

// The benchmark entity: ten typed properties, about 500 bytes of JSON, the
// shape of a typical application record.
const (
	preloadRows = 1000 // per partition: one partition scan reads 1000
	categories  = 100  // filter-scan matches 1 in 100 entities
	batchSize   = 100  // entities of one batch-insert transaction
)

// dataSet is the preloaded data of the scenarios that read: partitions of
// preloadRows entities each (-preload sets their number).
type dataSet struct{ partitions int }

func (d dataSet) total() int { return d.partitions * preloadRows }

// key returns the keys of entity number i.
func (d dataSet) key(i int) (pk, rk string) {
	return fmt.Sprintf("p%05d", i/preloadRows), fmt.Sprintf("r%05d", i%preloadRows)
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 123456700, time.UTC)

// entityProps returns the properties of entity number i.
func entityProps(i int) []odata.Property {
	blob := make([]byte, 48)
	for j := range blob {
		blob[j] = byte(i + j)
	}
	str := func(s string) odata.Value { return odata.Value{Type: odata.EdmString, Str: s} }
	return []odata.Property{
		{Name: "Name", Value: str(fmt.Sprintf("Customer number %08d of the benchmark", i))},
		{Name: "Email", Value: str(fmt.Sprintf("customer%08d@example.com", i))},
		{Name: "Cat", Value: odata.Value{Type: odata.EdmInt32, Int: int64(i % categories)}},
		{Name: "Score", Value: odata.Value{Type: odata.EdmDouble, Float: float64(i) / 7}},
		{Name: "Big", Value: odata.Value{Type: odata.EdmInt64, Int: int64(i) * 1_000_000_007}},
		{Name: "Active", Value: odata.Value{Type: odata.EdmBoolean, Bool: i%2 == 0}},
		{Name: "Since", Value: odata.Value{Type: odata.EdmDateTime, Int: odata.Ticks(epoch) + int64(i)*10_000_000}},
		{Name: "Ref", Value: odata.Value{Type: odata.EdmGuid, Str: fmt.Sprintf("c9da6455-213d-42c9-9a79-%012x", i)}},
		{Name: "Blob", Value: odata.Value{Type: odata.EdmBinary, Bytes: blob}},
		{Name: "Note", Value: str("A note long enough to make the entity about five hundred bytes on the wire, as real ones are.")},
	}
}

// entityJSON is the request body of entity i with the given keys, in the
// form the SDKs send: annotations for the types JSON cannot carry.
func entityJSON(pk, rk string, i int) []byte {
	b := make([]byte, 0, 640)
	b = append(b, `{"PartitionKey":`...)
	b = strconv.AppendQuote(b, pk)
	b = append(b, `,"RowKey":`...)
	b = strconv.AppendQuote(b, rk)
	if i >= 0 && i < batchSize {
		return append(b, batchTails()[i]...)
	}
	return appendPropsJSON(b, i)
}

// batchTails are the properties of entities 0..batchSize-1 as JSON, from
// the ',' after the keys to the closing '}': the entities of every
// batch-insert operation. Built once, so that the load tool spends its
// CPU, which the server and PostgreSQL share, on sending them (the ceiling
// likewise reuses their stored form).
var batchTails = sync.OnceValue(func() [][]byte {
	tails := make([][]byte, batchSize)
	for i := range tails {
		tails[i] = appendPropsJSON(nil, i)
	}
	return tails
})

// batchStored is the stored (jsonb) form of the same properties.
var batchStored = sync.OnceValue(func() [][]byte {
	stored := make([][]byte, batchSize)
	for i := range stored {
		stored[i] = odata.AppendStored(nil, entityProps(i))
	}
	return stored
})

// appendPropsJSON appends the properties of entity i and the closing '}'.
func appendPropsJSON(b []byte, i int) []byte {
	for _, p := range entityProps(i) {
		b = append(b, ',')
		v := p.Value
		switch v.Type {
		case odata.EdmString:
			b = strconv.AppendQuote(append(b, `"`+p.Name+`":`...), v.Str)
		case odata.EdmInt32:
			b = strconv.AppendInt(append(b, `"`+p.Name+`":`...), v.Int, 10)
		case odata.EdmDouble:
			b = odata.AppendDouble(append(b, `"`+p.Name+`":`...), v.Float)
		case odata.EdmBoolean:
			b = strconv.AppendBool(append(b, `"`+p.Name+`":`...), v.Bool)
		case odata.EdmInt64:
			b = append(b, `"`+p.Name+`@odata.type":"Edm.Int64","`+p.Name+`":"`+strconv.FormatInt(v.Int, 10)+`"`...)
		case odata.EdmDateTime:
			b = append(b, `"`+p.Name+`@odata.type":"Edm.DateTime","`+p.Name+`":"`+odata.FormatDateTime(v.Int)+`"`...)
		case odata.EdmGuid:
			b = append(b, `"`+p.Name+`@odata.type":"Edm.Guid","`+p.Name+`":"`+v.Str+`"`...)
		case odata.EdmBinary:
			b = append(b, `"`+p.Name+`@odata.type":"Edm.Binary","`+p.Name+`":"`+base64.StdEncoding.EncodeToString(v.Bytes)+`"`...)
		}
	}
	return append(b, '}')
}
