package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
)

// The $batch bodies below are the shapes each SDK sends (rest-protocol.md
// §6.2): the Go and JS ones as captured from aztables v1.3.0 and
// @azure/data-tables 13.3.2, the .NET and Python ones as recorded in the
// spec, plus the variants the reader must tolerate.

// lines joins lines with CRLF, as every SDK writes them.
func lines(l ...string) string { return strings.Join(l, "\r\n") }

const (
	goBatchCT = "multipart/mixed; boundary=batch_82fceda5-aa38-4bfa-4f78-47c84c038577"
	jsBatchCT = "multipart/mixed; boundary=batch_13cb8dae-bcba-4eeb-bf5c-68be622e5f9b"
	dnBatchCT = "multipart/mixed; boundary=batch_5e1b0c8a-6b3e-4a8e-9c2f-3d1f6a7b8c9d"
	pyBatchCT = "multipart/mixed; boundary=batch_fa83e7a5-1b2c-4d3e-8f90-a1b2c3d4e5f6"
)

// goBody: aztables v1.3.0 (insert, update-merge with an ETag, upsert-replace,
// delete): sorted part headers, empty DataServiceVersion and x-ms-version,
// $format on the insert and delete URLs, the quote in p'1 not doubled, a
// DELETE without body or Content-Length.
var goBody = lines(
	"--batch_82fceda5-aa38-4bfa-4f78-47c84c038577",
	"Content-Type: multipart/mixed; boundary=changeset_59f7908f-647b-4be9-6c3a-5720f170dc25",
	"",
	"--changeset_59f7908f-647b-4be9-6c3a-5720f170dc25",
	"Content-Transfer-Encoding: binary",
	"Content-Type: application/http",
	"",
	"POST http://127.0.0.1:10002/devstoreaccount1/mytable?%24format=application%2Fjson%3Bodata%3Dminimalmetadata HTTP/1.1",
	"Accept: application/json;odata=minimalmetadata",
	"Content-Length: 43",
	"Content-Type: application/json",
	"DataServiceVersion: ",
	"Prefer: return-no-content",
	"x-ms-version: ",
	"",
	`{"PartitionKey":"p'1","RowKey":"r 1","V":1}`,
	"--changeset_59f7908f-647b-4be9-6c3a-5720f170dc25",
	"Content-Transfer-Encoding: binary",
	"Content-Type: application/http",
	"",
	"PATCH http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p%271',RowKey='r2') HTTP/1.1",
	"Accept: application/json",
	"Content-Length: 36",
	"Content-Type: application/json",
	"DataServiceVersion: ",
	`If-Match: W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`,
	"x-ms-version: ",
	"",
	`{"PartitionKey":"p'1","RowKey":"r2"}`,
	"--changeset_59f7908f-647b-4be9-6c3a-5720f170dc25",
	"Content-Transfer-Encoding: binary",
	"Content-Type: application/http",
	"",
	"PUT http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p%271',RowKey='r3') HTTP/1.1",
	"Accept: application/json",
	"Content-Length: 36",
	"Content-Type: application/json",
	"DataServiceVersion: ",
	"x-ms-version: ",
	"",
	`{"PartitionKey":"p'1","RowKey":"r3"}`,
	"--changeset_59f7908f-647b-4be9-6c3a-5720f170dc25",
	"Content-Transfer-Encoding: binary",
	"Content-Type: application/http",
	"",
	"DELETE http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p%271',RowKey='r4')?%24format=application%2Fjson%3Bodata%3Dminimalmetadata HTTP/1.1",
	"Accept: application/json;odata=minimalmetadata",
	"DataServiceVersion: ",
	"If-Match: *",
	"x-ms-version: ",
	"",
	"",
	"--changeset_59f7908f-647b-4be9-6c3a-5720f170dc25--",
	"",
	"--batch_82fceda5-aa38-4bfa-4f78-47c84c038577--",
	"",
)

// jsBody: @azure/data-tables 13.3.2, captured: lower-case part headers, a
// blank line after the batch part's headers, no Content-Length, an extra
// CRLF before each body, the quote doubled, no blank line between the two
// closing delimiters.
var jsBody = lines(
	"--batch_13cb8dae-bcba-4eeb-bf5c-68be622e5f9b",
	"content-type: multipart/mixed; boundary=changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32",
	"",
	"",
	"--changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32",
	"content-type: application/http",
	"content-transfer-encoding: binary",
	"",
	"POST http://127.0.0.1:10002/devstoreaccount1/mytable HTTP/1.1",
	"Content-Type: application/json;odata=nometadata",
	"Accept: application/json;odata=minimalmetadata",
	"DataServiceVersion: 3.0",
	"Prefer: return-no-content",
	"",
	"",
	`{"PartitionKey":"p'1","RowKey":"r 1","V":1}`,
	"--changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32",
	"content-type: application/http",
	"content-transfer-encoding: binary",
	"",
	"PATCH http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r2') HTTP/1.1",
	"Content-Type: application/json",
	"DataServiceVersion: 3.0",
	"Accept: application/json",
	`If-Match: W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`,
	"",
	"",
	`{"PartitionKey":"p'1","RowKey":"r2","W":"x"}`,
	"--changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32",
	"content-type: application/http",
	"content-transfer-encoding: binary",
	"",
	"PUT http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r3') HTTP/1.1",
	"Content-Type: application/json",
	"DataServiceVersion: 3.0",
	"Accept: application/json",
	"",
	"",
	`{"PartitionKey":"p'1","RowKey":"r3"}`,
	"--changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32",
	"content-type: application/http",
	"content-transfer-encoding: binary",
	"",
	"DELETE http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r4') HTTP/1.1",
	"Accept: application/json;odata=minimalmetadata",
	"DataServiceVersion: 3.0",
	"If-Match: *",
	"",
	"",
	"--changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32--",
	"--batch_13cb8dae-bcba-4eeb-bf5c-68be622e5f9b--",
	"",
)

// jsLowerBody: the JS variant rest-protocol.md §6.2 describes, with the
// pipeline's headers in lower case and an x-ms-client-request-id.
var jsLowerBody = lines(
	"--batch_13cb8dae-bcba-4eeb-bf5c-68be622e5f9b",
	"Content-Type: multipart/mixed; boundary=changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32",
	"",
	"--changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32",
	"Content-Type: application/http",
	"Content-Transfer-Encoding: binary",
	"",
	"POST http://127.0.0.1:10002/devstoreaccount1/mytable HTTP/1.1",
	"content-type: application/json;odata=nometadata",
	"accept: application/json",
	"dataserviceversion: 3.0",
	"prefer: return-no-content",
	"x-ms-client-request-id: 5a4c1f2e-0b1d-4f7e-8d5e-6f7a8b9c0d1e",
	"",
	"",
	`{"PartitionKey":"pk","RowKey":"a","N":"x"}`,
	"--changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32",
	"Content-Type: application/http",
	"Content-Transfer-Encoding: binary",
	"",
	"DELETE http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='pk',RowKey='b') HTTP/1.1",
	"accept: application/json",
	"dataserviceversion: 3.0",
	"if-match: *",
	"x-ms-client-request-id: 5a4c1f2e-0b1d-4f7e-8d5e-6f7a8b9c0d1f",
	"",
	"",
	"--changeset_9f73d630-7f32-4c5d-9d44-339a064ebb32--",
	"--batch_13cb8dae-bcba-4eeb-bf5c-68be622e5f9b--",
	"",
)

// dotnetBody: Azure.Data.Tables: a Host header and $format on every URL.
// The DELETE part ends right after its headers.
var dotnetBody = lines(
	"--batch_5e1b0c8a-6b3e-4a8e-9c2f-3d1f6a7b8c9d",
	"Content-Type: multipart/mixed; boundary=changeset_0d22e1f0-4c3b-4a5d-8e6f-7a8b9c0d1e2f",
	"",
	"--changeset_0d22e1f0-4c3b-4a5d-8e6f-7a8b9c0d1e2f",
	"Content-Type: application/http",
	"Content-Transfer-Encoding: binary",
	"",
	"POST http://127.0.0.1:10002/devstoreaccount1/mytable?$format=application%2Fjson%3Bodata%3Dminimalmetadata HTTP/1.1",
	"Host: 127.0.0.1",
	"x-ms-version: 2020-12-06",
	"DataServiceVersion: 3.0",
	"Prefer: return-no-content",
	"Accept: application/json",
	"Content-Type: application/json; odata=nometadata",
	"",
	`{"PartitionKey":"ad92","RowKey":"a","V":1}`,
	"--changeset_0d22e1f0-4c3b-4a5d-8e6f-7a8b9c0d1e2f",
	"Content-Type: application/http",
	"Content-Transfer-Encoding: binary",
	"",
	"PATCH http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='ad92',RowKey='b')?$format=application%2Fjson%3Bodata%3Dminimalmetadata HTTP/1.1",
	"Host: 127.0.0.1",
	"x-ms-version: 2020-12-06",
	"DataServiceVersion: 3.0",
	`If-Match: W/"datetime'2021-05-22T22%3A58%3A40.6450000Z'"`,
	"Accept: application/json",
	"Content-Type: application/json",
	"",
	`{"PartitionKey":"ad92","RowKey":"b"}`,
	"--changeset_0d22e1f0-4c3b-4a5d-8e6f-7a8b9c0d1e2f",
	"Content-Type: application/http",
	"Content-Transfer-Encoding: binary",
	"",
	"DELETE http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='ad92',RowKey='c')?$format=application%2Fjson%3Bodata%3Dminimalmetadata HTTP/1.1",
	"Host: 127.0.0.1",
	"x-ms-version: 2020-12-06",
	"DataServiceVersion: 3.0",
	"If-Match: *",
	"Accept: application/json",
	"",
	"--changeset_0d22e1f0-4c3b-4a5d-8e6f-7a8b9c0d1e2f--",
	"--batch_5e1b0c8a-6b3e-4a8e-9c2f-3d1f6a7b8c9d--",
	"",
)

// pyBody: azure-data-tables: Content-ID part headers, Edm.String
// annotations on the keys, x-ms-date and Date inside parts, and a
// host-style absolute URL (the outer request is host-style too).
var (
	pyInsert = `{"PartitionKey": "pk7b0a2aca", "PartitionKey@odata.type": "Edm.String", "RowKey": "rk1", "RowKey@odata.type": "Edm.String", "Name": "a", "Name@odata.type": "Edm.String"}`
	pyMerge  = `{"PartitionKey": "pk7b0a2aca", "PartitionKey@odata.type": "Edm.String", "RowKey": "rk2", "RowKey@odata.type": "Edm.String", "Age": 23}`
	pyBody   = lines(
		"--batch_fa83e7a5-1b2c-4d3e-8f90-a1b2c3d4e5f6",
		"Content-Type: multipart/mixed; boundary=changeset_d347b2c1-9e8f-4a7b-b6c5-d4e3f2a1b0c9",
		"",
		"--changeset_d347b2c1-9e8f-4a7b-b6c5-d4e3f2a1b0c9",
		"Content-Type: application/http",
		"Content-Transfer-Encoding: binary",
		"Content-ID: 0",
		"",
		"POST https://devstoreaccount1.table.core.windows.net/mytable HTTP/1.1",
		"x-ms-version: 2019-02-02",
		"DataServiceVersion: 3.0",
		"Prefer: return-no-content",
		"Content-Type: application/json;odata=nometadata",
		"Accept: application/json;odata=minimalmetadata",
		"Content-Length: "+strconv.Itoa(len(pyInsert)),
		"x-ms-date: Tue, 21 Sep 2021 00:52:39 GMT",
		"Date: Tue, 21 Sep 2021 00:52:39 GMT",
		"",
		pyInsert,
		"--changeset_d347b2c1-9e8f-4a7b-b6c5-d4e3f2a1b0c9",
		"Content-Type: application/http",
		"Content-Transfer-Encoding: binary",
		"Content-ID: 1",
		"",
		"PATCH https://devstoreaccount1.table.core.windows.net/mytable(PartitionKey='pk7b0a2aca',RowKey='rk2') HTTP/1.1",
		"x-ms-version: 2019-02-02",
		"DataServiceVersion: 3.0",
		`If-Match: W/"datetime'2012-06-15T22%3A51%3A44.9662825Z'"`,
		"Content-Type: application/json",
		"Accept: application/json",
		"Content-Length: "+strconv.Itoa(len(pyMerge)),
		"x-ms-date: Tue, 21 Sep 2021 00:52:39 GMT",
		"Date: Tue, 21 Sep 2021 00:52:39 GMT",
		"",
		pyMerge,
		"--changeset_d347b2c1-9e8f-4a7b-b6c5-d4e3f2a1b0c9--",
		"",
		"--batch_fa83e7a5-1b2c-4d3e-8f90-a1b2c3d4e5f6--",
		"",
	)
)

// relativeBody uses absolute paths instead of absolute URLs and a quoted
// boundary parameter on both levels.
var relativeBody = lines(
	"--batch_rel",
	`Content-Type: multipart/mixed; boundary="changeset_rel"`,
	"",
	"--changeset_rel",
	"Content-Type: application/http",
	"Content-Transfer-Encoding: binary",
	"",
	"PUT /devstoreaccount1/mytable(PartitionKey='pk',RowKey='a') HTTP/1.1",
	"Content-Type: application/json",
	"",
	`{"V":1}`,
	"--changeset_rel",
	"Content-Type: application/http",
	"Content-Transfer-Encoding: binary",
	"",
	"MERGE /devstoreaccount1/mytable(PartitionKey='pk',RowKey='b') HTTP/1.1",
	"If-Match: *",
	"",
	`{"V":2}`,
	"--changeset_rel--",
	"--batch_rel--",
	"",
)

const relativeCT = `multipart/mixed; boundary="batch_rel"`

// lfOnly turns an SDK body's CRLFs into bare LFs.
func lfOnly(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// batchFixture is one SDK shape with what the reader must make of it.
type batchFixture struct {
	name string
	host string // outer request Host; default 127.0.0.1:10002 (path-style)
	ua   string // outer request User-Agent
	ct   string
	body string
	ops  []wantSubRequest
	// writes is what validation must make of the operations.
	writes []wantWrite
}

type wantSubRequest struct {
	method, target, body string
	// header values to find; "" means the header must be absent.
	header map[string]string
}

type wantWrite struct {
	op     store.Op
	pk, rk string
	match  string // "", "*" or "etag"
	format odata.Format
	prefer string
	props  int
}

var goOps = []wantSubRequest{
	{"POST", "http://127.0.0.1:10002/devstoreaccount1/mytable?%24format=application%2Fjson%3Bodata%3Dminimalmetadata",
		`{"PartitionKey":"p'1","RowKey":"r 1","V":1}`,
		map[string]string{"Prefer": "return-no-content", "Content-Length": "43", "DataServiceVersion": "", "x-ms-version": ""}},
	{"PATCH", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p%271',RowKey='r2')",
		`{"PartitionKey":"p'1","RowKey":"r2"}`,
		map[string]string{"If-Match": `W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`, "DataServiceVersion": ""}},
	{"PUT", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p%271',RowKey='r3')",
		`{"PartitionKey":"p'1","RowKey":"r3"}`, map[string]string{"If-Match": ""}},
	{"DELETE", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p%271',RowKey='r4')?%24format=application%2Fjson%3Bodata%3Dminimalmetadata",
		"", map[string]string{"If-Match": "*", "Content-Length": ""}},
}

// goUserAgent is what azcore sends for aztables.
const goUserAgent = "azsdk-go-aztables/v1.3.0 (go1.26.8; linux)"

var goWrites = []wantWrite{
	{store.OpInsert, "p'1", "r 1", "", odata.MinimalMetadata, "return-no-content", 1},
	{store.OpMerge, "p'1", "r2", "etag", odata.MinimalMetadata, "", 0},
	{store.OpReplace, "p'1", "r3", "", odata.MinimalMetadata, "", 0},
	{store.OpDelete, "p'1", "r4", "*", odata.MinimalMetadata, "", 0},
}

var batchFixtures = []batchFixture{
	{name: "Go", ua: goUserAgent, ct: goBatchCT, body: goBody, ops: goOps, writes: goWrites},
	{name: "GoLFOnly", ua: goUserAgent, ct: goBatchCT, body: lfOnly(goBody), ops: goOps, writes: goWrites},
	{name: "JS", ct: jsBatchCT, body: jsBody,
		ops: []wantSubRequest{
			{"POST", "http://127.0.0.1:10002/devstoreaccount1/mytable", `{"PartitionKey":"p'1","RowKey":"r 1","V":1}`,
				map[string]string{"Content-Length": "", "Content-Type": "application/json;odata=nometadata", "Prefer": "return-no-content", "x-ms-version": ""}},
			{"PATCH", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r2')", `{"PartitionKey":"p'1","RowKey":"r2","W":"x"}`,
				map[string]string{"If-Match": `W/"datetime'2020-01-01T00%3A00%3A00.0000000Z'"`}},
			{"PUT", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r3')", `{"PartitionKey":"p'1","RowKey":"r3"}`, nil},
			{"DELETE", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r4')", "", map[string]string{"If-Match": "*"}},
		},
		writes: []wantWrite{
			{store.OpInsert, "p'1", "r 1", "", odata.MinimalMetadata, "return-no-content", 1},
			{store.OpMerge, "p'1", "r2", "etag", odata.MinimalMetadata, "", 1},
			{store.OpReplace, "p'1", "r3", "", odata.MinimalMetadata, "", 0},
			{store.OpDelete, "p'1", "r4", "*", odata.MinimalMetadata, "", 0},
		}},
	{name: "JSLFOnly", ct: jsBatchCT, body: lfOnly(jsBody),
		ops: []wantSubRequest{
			{"POST", "http://127.0.0.1:10002/devstoreaccount1/mytable", `{"PartitionKey":"p'1","RowKey":"r 1","V":1}`, nil},
			{"PATCH", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r2')", `{"PartitionKey":"p'1","RowKey":"r2","W":"x"}`, nil},
			{"PUT", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r3')", `{"PartitionKey":"p'1","RowKey":"r3"}`, nil},
			{"DELETE", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p''1',RowKey='r4')", "", nil},
		}},
	{name: "JSLowerCaseHeaders", ct: jsBatchCT, body: jsLowerBody,
		ops: []wantSubRequest{
			{"POST", "http://127.0.0.1:10002/devstoreaccount1/mytable", `{"PartitionKey":"pk","RowKey":"a","N":"x"}`,
				map[string]string{"Content-Type": "application/json;odata=nometadata", "Prefer": "return-no-content", "X-Ms-Client-Request-Id": "5a4c1f2e-0b1d-4f7e-8d5e-6f7a8b9c0d1e"}},
			{"DELETE", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='pk',RowKey='b')", "", map[string]string{"If-Match": "*"}},
		},
		writes: []wantWrite{
			{store.OpInsert, "pk", "a", "", odata.MinimalMetadata, "return-no-content", 1},
			{store.OpDelete, "pk", "b", "*", odata.MinimalMetadata, "", 0},
		}},
	{name: "DotNet", ct: dnBatchCT, body: dotnetBody,
		ops: []wantSubRequest{
			{"POST", "http://127.0.0.1:10002/devstoreaccount1/mytable?$format=application%2Fjson%3Bodata%3Dminimalmetadata", `{"PartitionKey":"ad92","RowKey":"a","V":1}`,
				map[string]string{"Host": "127.0.0.1", "x-ms-version": "2020-12-06"}},
			{"PATCH", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='ad92',RowKey='b')?$format=application%2Fjson%3Bodata%3Dminimalmetadata", `{"PartitionKey":"ad92","RowKey":"b"}`,
				map[string]string{"If-Match": `W/"datetime'2021-05-22T22%3A58%3A40.6450000Z'"`}},
			{"DELETE", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='ad92',RowKey='c')?$format=application%2Fjson%3Bodata%3Dminimalmetadata", "",
				map[string]string{"If-Match": "*", "Accept": "application/json"}},
		},
		writes: []wantWrite{
			{store.OpInsert, "ad92", "a", "", odata.MinimalMetadata, "return-no-content", 1},
			{store.OpMerge, "ad92", "b", "etag", odata.MinimalMetadata, "", 0},
			{store.OpDelete, "ad92", "c", "*", odata.MinimalMetadata, "", 0},
		}},
	{name: "Python", host: "devstoreaccount1.table.core.windows.net", ct: pyBatchCT, body: pyBody,
		ops: []wantSubRequest{
			{"POST", "https://devstoreaccount1.table.core.windows.net/mytable", pyInsert,
				map[string]string{"Content-ID": "", "x-ms-date": "Tue, 21 Sep 2021 00:52:39 GMT", "Date": "Tue, 21 Sep 2021 00:52:39 GMT"}},
			{"PATCH", "https://devstoreaccount1.table.core.windows.net/mytable(PartitionKey='pk7b0a2aca',RowKey='rk2')", pyMerge,
				map[string]string{"If-Match": `W/"datetime'2012-06-15T22%3A51%3A44.9662825Z'"`}},
		},
		writes: []wantWrite{
			{store.OpInsert, "pk7b0a2aca", "rk1", "", odata.MinimalMetadata, "return-no-content", 1},
			{store.OpMerge, "pk7b0a2aca", "rk2", "etag", odata.MinimalMetadata, "", 1},
		}},
	{name: "FormatWithUnencodedSemicolon", ct: "multipart/mixed; boundary=batch_t", body: func() string {
		_, b := batch(lines("POST /devstoreaccount1/mytable?$format=application/json;odata=nometadata&sv=2019-02-02&sig=x HTTP/1.1",
			"Prefer: return-no-content", "", `{"PartitionKey":"pk","RowKey":"a"}`))
		return b
	}(),
		ops: []wantSubRequest{
			{"POST", "/devstoreaccount1/mytable?$format=application/json;odata=nometadata&sv=2019-02-02&sig=x", `{"PartitionKey":"pk","RowKey":"a"}`, nil},
		},
		writes: []wantWrite{
			{store.OpInsert, "pk", "a", "", odata.NoMetadata, "return-no-content", 0},
		}},
	{name: "RelativeURLsQuotedBoundary", ct: relativeCT, body: relativeBody,
		ops: []wantSubRequest{
			{"PUT", "/devstoreaccount1/mytable(PartitionKey='pk',RowKey='a')", `{"V":1}`, nil},
			{"MERGE", "/devstoreaccount1/mytable(PartitionKey='pk',RowKey='b')", `{"V":2}`, map[string]string{"If-Match": "*"}},
		},
		writes: []wantWrite{
			{store.OpReplace, "pk", "a", "", odata.MinimalMetadata, "", 1},
			{store.OpMerge, "pk", "b", "*", odata.MinimalMetadata, "", 1},
		}},
}

func TestReadBatchSDKShapes(t *testing.T) {
	t.Parallel()
	for _, fx := range batchFixtures {
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			br, err := readBatch(fx.ct, []byte(fx.body))
			if err != nil {
				t.Fatalf("readBatch: %v", err)
			}
			if br.query != nil {
				t.Fatalf("read as a query batch")
			}
			if len(br.changeset) != len(fx.ops) {
				t.Fatalf("got %d operations, want %d", len(br.changeset), len(fx.ops))
			}
			for i, want := range fx.ops {
				got := br.changeset[i]
				if got.method != want.method || got.target != want.target {
					t.Errorf("op %d: got %s %s, want %s %s", i, got.method, got.target, want.method, want.target)
				}
				if string(got.body) != want.body {
					t.Errorf("op %d: body %q, want %q", i, got.body, want.body)
				}
				for name, v := range want.header {
					if vals := got.header.Values(name); v == "" && len(vals) > 0 {
						t.Errorf("op %d: header %s = %q, want it absent", i, name, vals)
					} else if v != "" && (len(vals) != 1 || vals[0] != v) {
						t.Errorf("op %d: header %s = %q, want %q", i, name, vals, v)
					}
				}
			}
		})
	}
}

// newBatchTestRequest returns a request as handle leaves it for POST
// /$batch from host and a client of that User-Agent, without a database.
func newBatchTestRequest(t testing.TB, host, userAgent string) (*request, *httptest.ResponseRecorder) {
	t.Helper()
	if host == "" {
		host = "127.0.0.1:10002"
	}
	srv := New(Config{Version: "test"}, nil, slog.New(slog.DiscardHandler), nil)
	path := "/devstoreaccount1/$batch"
	if !strings.HasPrefix(host, "127.") {
		path = "/$batch"
	}
	r := httptest.NewRequest(http.MethodPost, path, nil)
	r.Host = host
	r.Header.Set("User-Agent", userAgent)
	rec := httptest.NewRecorder()
	rq := &request{srv: srv, c: srv.echo.NewContext(r, rec), id: newRequestID()}
	t1, err := route(r.Host, r.RequestURI, srv.knownAccount, nil)
	if err != nil {
		t.Fatalf("route: %v", err)
	}
	rq.t = t1
	return rq, rec
}

func TestPrepareChangesetSDKShapes(t *testing.T) {
	t.Parallel()
	for _, fx := range batchFixtures {
		if fx.writes == nil {
			continue
		}
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			br, err := readBatch(fx.ct, []byte(fx.body))
			if err != nil {
				t.Fatalf("readBatch: %v", err)
			}
			rq, _ := newBatchTestRequest(t, fx.host, fx.ua)
			ops, writes, table, failed, err := rq.prepareChangeset(br.changeset)
			if err != nil {
				t.Fatalf("operation %d refused: %v", failed, err)
			}
			if table != "mytable" {
				t.Errorf("table %q", table)
			}
			if len(writes) != len(fx.writes) {
				t.Fatalf("got %d writes, want %d", len(writes), len(fx.writes))
			}
			for i, want := range fx.writes {
				w := writes[i]
				match := ""
				switch {
				case w.Match == store.MatchAny:
					match = "*"
				case w.Match.Conditional():
					match = "etag"
				}
				if w.Op != want.op || w.PartitionKey != want.pk || w.RowKey != want.rk || match != want.match || len(w.Properties) != want.props {
					t.Errorf("write %d: got op %d %q/%q match %q %d props, want op %d %q/%q match %q %d props",
						i, w.Op, w.PartitionKey, w.RowKey, match, len(w.Properties), want.op, want.pk, want.rk, want.match, want.props)
				}
				if ops[i].format != want.format || ops[i].prefer != want.prefer {
					t.Errorf("write %d: format %d prefer %q, want %d %q", i, ops[i].format, ops[i].prefer, want.format, want.prefer)
				}
			}
		})
	}
}

// batch builds a one-changeset body from raw parts (each the content of an
// application/http part), CRLF line ends.
func batch(parts ...string) (ct string, body string) {
	var b strings.Builder
	b.WriteString("--batch_t\r\nContent-Type: multipart/mixed; boundary=changeset_t\r\n\r\n")
	for _, p := range parts {
		b.WriteString("--changeset_t\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n")
		b.WriteString(p)
		b.WriteString("\r\n")
	}
	b.WriteString("--changeset_t--\r\n--batch_t--\r\n")
	return "multipart/mixed; boundary=batch_t", b.String()
}

// insertPart is a Go-style insert of {"PartitionKey":pk,"RowKey":rk}.
func insertPart(pk, rk string) string {
	return lines(
		"POST http://127.0.0.1:10002/devstoreaccount1/mytable HTTP/1.1",
		"Content-Type: application/json",
		"Prefer: return-no-content",
		"",
		fmt.Sprintf(`{"PartitionKey":%q,"RowKey":%q}`, pk, rk))
}

func TestReadBatchErrors(t *testing.T) {
	t.Parallel()
	okCT, okBody := batch(insertPart("p", "r"))
	const changesetPart = "--batch_t\r\nContent-Type: multipart/mixed; boundary=changeset_t\r\n\r\n"
	tests := []struct {
		name, ct, body string
	}{
		{"NotMultipart", "application/json", okBody},
		{"MultipartOtherSubtype", "multipart/related; boundary=batch_t", okBody},
		{"NoBoundary", "multipart/mixed", okBody},
		{"EmptyBoundary", `multipart/mixed; boundary=""`, okBody},
		{"MalformedContentType", "multipart/mixed; boundary", okBody},
		{"NoContentType", "", okBody},
		{"EmptyBody", okCT, ""},
		{"Garbage", okCT, "this is not a multipart body at all\r\n"},
		{"OtherBoundary", "multipart/mixed; boundary=batch_other", okBody},
		{"Truncated", okCT, okBody[:len(okBody)/2]},
		{"NoClosingDelimiters", okCT, strings.TrimSuffix(okBody, "--changeset_t--\r\n--batch_t--\r\n")},
		{"NoChangeset", okCT, "--batch_t--\r\n"},
		{"TwoChangesets", okCT, strings.TrimSuffix(okBody, "--batch_t--\r\n") +
			"--batch_t\r\nContent-Type: multipart/mixed; boundary=changeset_u\r\n\r\n--changeset_u\r\nContent-Type: application/http\r\n\r\n" +
			insertPart("p", "s") + "\r\n--changeset_u--\r\n--batch_t--\r\n"},
		{"ChangesetAndQuery", okCT, strings.TrimSuffix(okBody, "--batch_t--\r\n") +
			"--batch_t\r\nContent-Type: application/http\r\n\r\nGET /devstoreaccount1/mytable HTTP/1.1\r\n\r\n--batch_t--\r\n"},
		{"BatchPartTextPlain", okCT, "--batch_t\r\nContent-Type: text/plain\r\n\r\nhello\r\n--batch_t--\r\n"},
		{"BatchPartNoContentType", okCT, "--batch_t\r\n\r\nhello\r\n--batch_t--\r\n"},
		{"ChangesetWithoutBoundary", okCT, "--batch_t\r\nContent-Type: multipart/mixed\r\n\r\n--changeset_t--\r\n--batch_t--\r\n"},
		{"ChangesetPartNotHTTP", okCT, changesetPart +
			"--changeset_t\r\nContent-Type: application/json\r\n\r\n{}\r\n--changeset_t--\r\n--batch_t--\r\n"},
		{"ChangesetPartNoContentType", okCT, changesetPart +
			"--changeset_t\r\n\r\n" + insertPart("p", "r") + "\r\n--changeset_t--\r\n--batch_t--\r\n"},
		{"QueryNotGet", okCT, "--batch_t\r\nContent-Type: application/http\r\n\r\n" + insertPart("p", "r") + "\r\n--batch_t--\r\n"},
	}
	bad := func(part string) string { _, b := batch(part); return b }
	for _, c := range []struct{ name, part string }{
		{"EmptyPart", ""},
		{"BlankPart", "\r\n\r\n"},
		{"RequestLineTwoFields", "POST /devstoreaccount1/mytable\r\n\r\n{}"},
		{"RequestLineFourFields", "POST /devstoreaccount1/mytable HTTP/1.1 extra\r\n\r\n{}"},
		{"RequestLineNotHTTP", "POST /devstoreaccount1/mytable FTP/1.0\r\n\r\n{}"},
		{"RequestLineHTTP2", "POST /devstoreaccount1/mytable HTTP/2\r\n\r\n{}"},
		{"RequestLineOnlyBody", `{"PartitionKey":"p","RowKey":"r"}`},
		{"HeaderWithoutColon", "POST /devstoreaccount1/mytable HTTP/1.1\r\nContent-Type application/json\r\n\r\n{}"},
		{"HeaderNameWithSpace", "POST /devstoreaccount1/mytable HTTP/1.1\r\nContent Type: application/json\r\n\r\n{}"},
		{"HeaderEmptyName", "POST /devstoreaccount1/mytable HTTP/1.1\r\n: application/json\r\n\r\n{}"},
		{"HeaderFolded", "POST /devstoreaccount1/mytable HTTP/1.1\r\nContent-Type: application/json\r\n  ;odata=nometadata\r\n\r\n{}"},
		{"ContentLengthLarger", "POST /devstoreaccount1/mytable HTTP/1.1\r\nContent-Length: 3\r\n\r\n{}"},
		{"ContentLengthSmaller", "POST /devstoreaccount1/mytable HTTP/1.1\r\nContent-Length: 1\r\n\r\n{}"},
		{"ContentLengthNegative", "POST /devstoreaccount1/mytable HTTP/1.1\r\nContent-Length: -2\r\n\r\n{}"},
		{"ContentLengthTwice", "POST /devstoreaccount1/mytable HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"},
		{"ContentLengthHex", "POST /devstoreaccount1/mytable HTTP/1.1\r\nContent-Length: 0x2\r\n\r\n{}"},
		{"HeadersOversized", "POST /devstoreaccount1/mytable HTTP/1.1\r\nX-Pad: " + strings.Repeat("x", maxSubHeaderBytes) + "\r\n\r\n{}"},
		{"PartHeadersOversized", "POST /devstoreaccount1/mytable HTTP/1.1\r\n\r\n{}\r\n--changeset_t\r\nContent-Type: application/http\r\nX-Pad: " + strings.Repeat("x", maxSubHeaderBytes) + "\r\n\r\n" + insertPart("p", "s")},
	} {
		tests = append(tests, struct{ name, ct, body string }{c.name, okCT, bad(c.part)})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			br, err := readBatch(tc.ct, []byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %+v", br)
			}
			ae, _, known := lookupError(err)
			if !known || ae.status != http.StatusBadRequest || ae.code != "InvalidInput" {
				t.Errorf("got %d %s (%v), want 400 InvalidInput", ae.status, ae.code, err)
			}
		})
	}
}

// fakeBatchStore answers batches as the store would for one account
// holding the table "mytable" (any case): every other table is missing.
type fakeBatchStore struct {
	fail   error // returned by Batch when set
	calls  int
	writes []store.Write
}

const fakeTable = "mytable"

func (f *fakeBatchStore) Batch(_ context.Context, _, table string, writes []store.Write) ([]store.Result, error) {
	f.calls++
	f.writes = writes
	if f.fail != nil {
		return nil, f.fail
	}
	if !strings.EqualFold(table, fakeTable) {
		return nil, &store.BatchError{Index: 0, Err: store.ErrTableNotFound}
	}
	now := odata.Ticks(time.Date(2026, 11, 22, 1, 2, 3, 400, time.UTC))
	res := make([]store.Result, len(writes))
	for i := range writes {
		if writes[i].Op != store.OpDelete {
			res[i] = store.Result{Timestamp: now, ETag: fmt.Sprintf(`W/"datetime'2026-11-22T01%%3A02%%3A03.0000004Z'-%d"`, 100+i)}
		}
	}
	return res, nil
}

func (f *fakeBatchStore) GetEntity(_ context.Context, _, table, pk, rk string) (*odata.Entity, error) {
	switch {
	case !strings.EqualFold(table, fakeTable):
		return nil, store.ErrTableNotFound
	case pk != "p" || rk != "r":
		return nil, store.ErrEntityNotFound
	}
	return &odata.Entity{PartitionKey: pk, RowKey: rk, Timestamp: 1, ETag: `W/"datetime'0001-01-01T00%3A00%3A00.0000001Z'-1"`,
		Properties: []odata.Property{{Name: "V", Value: odata.Value{Type: odata.EdmInt32, Int: 1}}}}, nil
}

func (f *fakeBatchStore) QueryEntities(_ context.Context, _, table string, _ store.EntityQuery) (*store.EntityPage, error) {
	if !strings.EqualFold(table, fakeTable) {
		return nil, store.ErrTableNotFound
	}
	return &store.EntityPage{Entities: []odata.Entity{{PartitionKey: "p", RowKey: "r", Timestamp: 1, ETag: `W/"x"`}}}, nil
}

// subAnswer is one sub-response of a $batch answer.
type subAnswer struct {
	raw    string // the part's content as sent
	status int
	header http.Header
	body   []byte
	// code and index of an error sub-response (index -1 without "N:").
	code  string
	index int
}

var (
	jsStatusPattern = regexp.MustCompile(`HTTP/1.1 ([0-9]*)`)
	jsBodyPattern   = regexp.MustCompile(`\{(.*)\}`)
	jsETagPattern   = regexp.MustCompile(`ETag: (.*)`)
	indexPattern    = regexp.MustCompile(`^(\d+):`)
)

// parseBatchAnswer reads a $batch answer the way the SDKs do (Go: boundary
// from the first line, mime/multipart, http.ReadResponse per part; JS:
// split on "--changesetresponse_") and reports anything they would choke
// on. query tells whether a query batch (no changeset level) is expected.
func parseBatchAnswer(status int, header http.Header, body []byte, query bool) ([]subAnswer, error) {
	if status != http.StatusAccepted {
		return nil, fmt.Errorf("status %d, want 202", status)
	}
	mt, params, err := mime.ParseMediaType(header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" || !strings.HasPrefix(params["boundary"], "batchresponse_") {
		return nil, fmt.Errorf("Content-Type %q", header.Get("Content-Type"))
	}
	outer := params["boundary"]
	if !bytes.HasPrefix(body, []byte("--"+outer+"\r\n")) {
		return nil, fmt.Errorf("body does not start with the boundary line: %.80q", body)
	}
	mr := multipart.NewReader(bytes.NewReader(body), outer)
	part, err := mr.NextPart()
	if err != nil {
		return nil, fmt.Errorf("batch part: %w", err)
	}
	content, err := io.ReadAll(part)
	if err != nil {
		return nil, fmt.Errorf("batch part: %w", err)
	}
	var raws []string
	pmt, pparams, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
	switch {
	case query:
		if pmt != "application/http" {
			return nil, fmt.Errorf("query batch part Content-Type %q", part.Header.Get("Content-Type"))
		}
		raws = append(raws, string(content))
	default:
		inner := pparams["boundary"]
		if pmt != "multipart/mixed" || !strings.HasPrefix(inner, "changesetresponse_") {
			return nil, fmt.Errorf("changeset part Content-Type %q", part.Header.Get("Content-Type"))
		}
		if !bytes.HasPrefix(content, []byte("--"+inner)) {
			return nil, fmt.Errorf("changeset part does not start with its boundary: %.80q", content)
		}
		cr := multipart.NewReader(bytes.NewReader(content), inner)
		for {
			p, err := cr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("changeset: %w", err)
			}
			if p.Header.Get("Content-Type") != "application/http" || p.Header.Get("Content-Transfer-Encoding") != "binary" {
				return nil, fmt.Errorf("sub-response part headers %v", p.Header)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				return nil, fmt.Errorf("sub-response: %w", err)
			}
			raws = append(raws, string(b))
		}
		// JS splits the text on the boundary prefix and drops the first
		// and last pieces; what remains must be the sub-responses.
		if pieces := strings.Split(string(body), "--changesetresponse_"); len(pieces)-2 != len(raws) {
			return nil, fmt.Errorf("JS would see %d sub-responses, mime/multipart %d", len(pieces)-2, len(raws))
		}
	}
	if _, err := mr.NextPart(); err != io.EOF {
		return nil, fmt.Errorf("more than one batch part (%v)", err)
	}
	answers := make([]subAnswer, 0, len(raws))
	for _, raw := range raws {
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
		if err != nil {
			return nil, fmt.Errorf("sub-response %q: %w", raw, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("sub-response body: %w", err)
		}
		a := subAnswer{raw: raw, status: resp.StatusCode, header: resp.Header, body: bytes.TrimSpace(b), index: -1}
		if m := jsStatusPattern.FindStringSubmatch(raw); m == nil || m[1] != strconv.Itoa(a.status) {
			return nil, fmt.Errorf("JS reads status %q from %q", m, raw)
		}
		if a.status >= 400 {
			var oe struct {
				Error struct {
					Code    string `json:"code"`
					Message struct {
						Lang  string `json:"lang"`
						Value string `json:"value"`
					} `json:"message"`
				} `json:"odata.error"`
			}
			m := jsBodyPattern.FindString(raw)
			if err := json.Unmarshal([]byte(m), &oe); err != nil || oe.Error.Code == "" {
				return nil, fmt.Errorf("error sub-response without a one-line odata.error: %q", raw)
			}
			a.code = oe.Error.Code
			if m := indexPattern.FindStringSubmatch(oe.Error.Message.Value); m != nil {
				a.index, _ = strconv.Atoi(m[1])
			}
		} else if a.status == http.StatusNoContent && jsBodyPattern.MatchString(raw) {
			return nil, fmt.Errorf("a 204 sub-response has {...} on a line, which JS takes for an error: %q", raw)
		}
		answers = append(answers, a)
	}
	return answers, nil
}

// answer runs body through the batch handler's steps on db and parses
// the multipart answer.
func answer(t *testing.T, host, userAgent, ct, body string, db batchStore) ([]subAnswer, *batchRequest) {
	t.Helper()
	br, err := readBatch(ct, []byte(body))
	if err != nil {
		t.Fatalf("readBatch: %v", err)
	}
	rq, rec := newBatchTestRequest(t, host, userAgent)
	w := newBatchWriter()
	if err := rq.answerBatch(w, br, db); err != nil {
		t.Fatalf("answerBatch: %v", err)
	}
	if err := rq.sendBatch(w); err != nil {
		t.Fatal(err)
	}
	subs, err := parseBatchAnswer(rec.Code, rec.Header(), rec.Body.Bytes(), br.query != nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, rec.Body.String())
	}
	return subs, br
}

func TestAnswerBatchSuccess(t *testing.T) {
	t.Parallel()
	for _, fx := range batchFixtures {
		if fx.writes == nil {
			continue
		}
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			db := &fakeBatchStore{}
			subs, _ := answer(t, fx.host, fx.ua, fx.ct, fx.body, db)
			if db.calls != 1 {
				t.Fatalf("store called %d times", db.calls)
			}
			if len(subs) != len(fx.writes) {
				t.Fatalf("got %d sub-responses, want %d", len(subs), len(fx.writes))
			}
			for i, s := range subs {
				if s.status != http.StatusNoContent {
					t.Errorf("sub-response %d: status %d, want 204", i, s.status)
				}
				etag := jsETagPattern.FindStringSubmatch(s.raw)
				switch fx.writes[i].op {
				case store.OpDelete:
					if etag != nil {
						t.Errorf("sub-response %d: a delete answered with an ETag", i)
					}
					continue
				case store.OpInsert:
					loc := s.header.Get("Location")
					if !strings.Contains(loc, "RowKey=") || s.header.Get("DataServiceId") != loc || s.header.Get("Preference-Applied") != "return-no-content" {
						t.Errorf("sub-response %d: insert headers %v", i, s.header)
					}
				}
				want := fmt.Sprintf(`W/"datetime'2026-11-22T01%%3A02%%3A03.0000004Z'-%d"`, 100+i)
				if etag == nil || strings.TrimSuffix(etag[1], "\r") != want {
					t.Errorf("sub-response %d: no line %q in %q", i, "ETag: "+want, s.raw)
				}
			}
		})
	}
}

func TestAnswerBatchInsertWithContent(t *testing.T) {
	t.Parallel()
	ct, body := batch(
		lines("POST http://127.0.0.1:10002/devstoreaccount1/mytable HTTP/1.1", "Content-Type: application/json", "Accept: application/json;odata=nometadata", "",
			`{"PartitionKey":"p","RowKey":"a","V":1}`),
		lines("POST http://127.0.0.1:10002/devstoreaccount1/mytable HTTP/1.1", "Content-Type: application/json", "Prefer: return-content", "",
			`{"PartitionKey":"p","RowKey":"b","V":2}`),
	)
	subs, _ := answer(t, "", "", ct, body, &fakeBatchStore{})
	if len(subs) != 2 {
		t.Fatalf("got %d sub-responses", len(subs))
	}
	for i, s := range subs {
		if s.status != http.StatusCreated || !strings.HasPrefix(s.header.Get("Content-Type"), "application/json") {
			t.Fatalf("sub-response %d: %d %v", i, s.status, s.header)
		}
		var e map[string]any
		if err := json.Unmarshal(s.body, &e); err != nil {
			t.Fatalf("sub-response %d body %q: %v", i, s.body, err)
		}
		if e["RowKey"] != string(rune('a'+i)) || e["V"] != float64(i+1) || e["Timestamp"] == nil {
			t.Errorf("sub-response %d entity %v", i, e)
		}
		if !strings.Contains(s.raw, "\r\nETag: W/") {
			t.Errorf("sub-response %d has no ETag line: %q", i, s.raw)
		}
	}
	if _, ok := subs[0].header["Preference-Applied"]; ok {
		t.Errorf("Preference-Applied without Prefer")
	}
	if subs[1].header.Get("Preference-Applied") != "return-content" {
		t.Errorf("Preference-Applied %q", subs[1].header.Get("Preference-Applied"))
	}
}

func TestAnswerBatchFailures(t *testing.T) {
	t.Parallel()
	entityURL := func(pk, rk string) string {
		return "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='" + pk + "',RowKey='" + rk + "')"
	}
	del := func(pk, rk, ifMatch string) string {
		l := []string{"DELETE " + entityURL(pk, rk) + " HTTP/1.1"}
		if ifMatch != "" {
			l = append(l, "If-Match: "+ifMatch)
		}
		return lines(append(l, "")...)
	}
	many := func(n int) []string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = insertPart("p", fmt.Sprintf("r%03d", i))
		}
		return parts
	}
	tests := []struct {
		name   string
		parts  []string
		fail   error // the fake store's answer
		status int
		code   string
		index  int
		stored bool // whether the store was asked to run the batch
	}{
		{"MixedPartitions", []string{insertPart("p", "a"), insertPart("q", "b")}, nil, 400, "CommandsInBatchActOnDifferentPartitions", 1, false},
		{"MixedTables", []string{insertPart("p", "a"), strings.Replace(insertPart("p", "b"), "/mytable ", "/othertable ", 1)}, nil,
			400, "CommandsInBatchActOnDifferentPartitions", 1, false},
		{"TableNameCaseDiffers", []string{insertPart("p", "a"), strings.Replace(insertPart("p", "b"), "/mytable ", "/MyTable ", 1)}, nil,
			0, "", 0, true},
		{"DuplicateRow", []string{insertPart("p", "a"), insertPart("p", "b"), del("p", "a", "*")}, nil, 400, "InvalidDuplicateRow", 2, false},
		{"TooManyOperations", many(101), nil, 400, "InvalidInput", 100, false},
		{"HundredOperations", many(100), nil, 0, "", 0, true},
		// Text from the request that holds the string the JS SDK splits
		// answers on must not split them.
		{"KeyHoldsJSSplitToken", []string{insertPart("p", "a--changesetresponse_b"), insertPart("p", "c")}, nil, 0, "", 0, true},
		{"MessageQuotesJSSplitToken", []string{insertPart("p", "a"), del("p", "b", "--changesetresponse_x")}, nil, 400, "InvalidInput", 1, false},
		{"GetInChangeset", []string{insertPart("p", "a"), lines("GET "+entityURL("p", "b")+" HTTP/1.1", "")}, nil, 400, "InvalidInput", 1, false},
		{"TableOperation", []string{lines("POST http://127.0.0.1:10002/devstoreaccount1/Tables HTTP/1.1", "Content-Type: application/json", "", `{"TableName":"x"}`)},
			nil, 400, "InvalidInput", 0, false},
		{"OtherAccount", []string{strings.Replace(insertPart("p", "a"), "devstoreaccount1", "otheraccount", 1)}, nil, 400, "InvalidInput", 0, false},
		{"DeleteWithoutIfMatch", []string{insertPart("p", "a"), del("p", "b", "")}, nil, 400, "MissingRequiredHeader", 1, false},
		{"MalformedIfMatch", []string{insertPart("p", "a"), del("p", "b", "not-an-etag")}, nil, 400, "InvalidInput", 1, false},
		{"InsertWithoutRowKey", []string{insertPart("p", "a"), lines("POST http://127.0.0.1:10002/devstoreaccount1/mytable HTTP/1.1", "", `{"PartitionKey":"p"}`)},
			nil, 400, "PropertiesNeedValue", 1, false},
		{"BadJSON", []string{insertPart("p", "a"), insertPart("p", "b"), lines("POST http://127.0.0.1:10002/devstoreaccount1/mytable HTTP/1.1", "", `{"PartitionKey":"p",`)},
			nil, 400, "InvalidInput", 2, false},
		{"BadPropertyName", []string{insertPart("p", "a"), lines("POST http://127.0.0.1:10002/devstoreaccount1/mytable HTTP/1.1", "", `{"PartitionKey":"p","RowKey":"b","bad name":1}`)},
			nil, 400, "PropertyNameInvalid", 1, false},
		{"BadKeyInURL", []string{insertPart("p", "a"), del("p", "b%2Fc", "*")}, nil, 400, "OutOfRangeInput", 1, false},
		{"AtomBody", []string{lines("PUT "+entityURL("p", "a")+" HTTP/1.1", "Content-Type: application/atom+xml", "", "<entry/>")}, nil, 415, "MediaTypeNotSupported", 0, false},
		{"AtomAccept", []string{lines("PUT "+entityURL("p", "a")+" HTTP/1.1", "Accept: application/atom+xml", "", `{}`)}, nil, 415, "AtomFormatNotSupported", 0, false},
		{"XMethodOnPut", []string{lines("PUT "+entityURL("p", "a")+" HTTP/1.1", "X-HTTP-Method: MERGE", "", `{}`)}, nil, 400, "XMethodNotUsingPost", 0, false},
		{"MissingTable", []string{strings.Replace(insertPart("p", "a"), "/mytable ", "/nosuchtable ", 1)}, nil, 404, "TableNotFound", 0, true},
		{"StoreEntityExists", []string{insertPart("p", "a"), insertPart("p", "b"), insertPart("p", "c")},
			&store.BatchError{Index: 2, Err: store.ErrEntityExists}, 409, "EntityAlreadyExists", 2, true},
		{"StoreNotFound", []string{insertPart("p", "a"), del("p", "b", "*")},
			&store.BatchError{Index: 1, Err: store.ErrEntityNotFound}, 404, "ResourceNotFound", 1, true},
		{"StoreCondition", []string{del("p", "b", "*")},
			&store.BatchError{Index: 0, Err: store.ErrConditionNotMet}, 412, "UpdateConditionNotSatisfied", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := &fakeBatchStore{fail: tc.fail}
			ct, body := batch(tc.parts...)
			subs, _ := answer(t, "", "", ct, body, db)
			if stored := db.calls > 0; stored != tc.stored {
				t.Errorf("store asked: %v, want %v", stored, tc.stored)
			}
			if tc.status == 0 {
				if len(subs) != len(tc.parts) {
					t.Fatalf("got %d sub-responses, want %d", len(subs), len(tc.parts))
				}
				for i, s := range subs {
					if s.status >= 300 {
						t.Errorf("sub-response %d: %d %s", i, s.status, s.code)
					}
				}
				return
			}
			if len(subs) != 1 {
				t.Fatalf("got %d sub-responses, want exactly one", len(subs))
			}
			s := subs[0]
			if s.status != tc.status || s.code != tc.code || s.index != tc.index {
				t.Errorf("got %d %s at %d, want %d %s at %d: %q", s.status, s.code, s.index, tc.status, tc.code, tc.index, s.raw)
			}
		})
	}
}

func TestAnswerBatchUnavailable(t *testing.T) {
	t.Parallel()
	ct, body := batch(insertPart("p", "a"))
	br, err := readBatch(ct, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	rq, _ := newBatchTestRequest(t, "", "")
	err = rq.answerBatch(newBatchWriter(), br, &fakeBatchStore{fail: fmt.Errorf("%w: connection reset", store.ErrUnavailable)})
	if ae, _, _ := lookupError(err); ae.status != http.StatusServiceUnavailable || ae.code != "ServerBusy" {
		t.Errorf("got %d %s (%v), want the whole request to fail with 503 ServerBusy", ae.status, ae.code, err)
	}
}

func TestAnswerQueryBatch(t *testing.T) {
	t.Parallel()
	query := func(target string) (string, string) {
		body := lines("--batch_q", "Content-Type: application/http", "Content-Transfer-Encoding: binary", "",
			"GET "+target+" HTTP/1.1", "Accept: application/json;odata=nometadata", "", "", "--batch_q--", "")
		return "multipart/mixed; boundary=batch_q", body
	}
	tests := []struct {
		name, target string
		status       int
		code         string
	}{
		{"Entity", "http://127.0.0.1:10002/devstoreaccount1/mytable(PartitionKey='p',RowKey='r')", 200, ""},
		{"EntitySet", "/devstoreaccount1/mytable()", 200, ""},
		{"MissingEntity", "/devstoreaccount1/mytable(PartitionKey='p',RowKey='x')", 404, "ResourceNotFound"},
		{"MissingTable", "/devstoreaccount1/nosuch(PartitionKey='p',RowKey='r')", 404, "TableNotFound"},
		{"NotAnEntity", "/devstoreaccount1/Tables", 400, "InvalidUri"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ct, body := query(tc.target)
			subs, _ := answer(t, "", "", ct, body, &fakeBatchStore{})
			if len(subs) != 1 || subs[0].status != tc.status || subs[0].code != tc.code {
				t.Fatalf("got %+v, want one %d %s", subs, tc.status, tc.code)
			}
			if tc.status == 200 && !json.Valid(subs[0].body) {
				t.Errorf("body %q", subs[0].body)
			}
		})
	}
}

// FuzzReadBatch feeds the reader arbitrary bodies. It must never panic,
// must refuse with a plain 400 InvalidInput, and whatever it accepts must
// be answerable: validation plus the response writer (on a store double
// that succeeds or fails at an operation chosen by the fuzzer) produce a
// multipart answer that mime/multipart and http.ReadResponse parse, with
// one sub-response per operation or exactly one error sub-response that
// names an operation of the batch.
func FuzzReadBatch(f *testing.F) {
	for _, fx := range batchFixtures {
		f.Add(fx.ct, []byte(fx.body), uint8(0))
		f.Add(fx.ct, []byte(fx.body), uint8(3))
	}
	ct, body := batch(insertPart("p", "a"), insertPart("p", "a"))
	f.Add(ct, []byte(body), uint8(0))
	ct, body = batch(insertPart("p", "a"), insertPart("q", "b"))
	f.Add(ct, []byte(body), uint8(1))
	ct, body = batch()
	f.Add(ct, []byte(body), uint8(0))
	f.Add("multipart/mixed; boundary=batch_q", []byte(lines("--batch_q", "Content-Type: application/http", "",
		"GET /devstoreaccount1/mytable(PartitionKey='p',RowKey='r') HTTP/1.1", "", "", "--batch_q--", "")), uint8(0))
	f.Add("application/json", []byte(`{}`), uint8(0))
	failures := []error{store.ErrEntityExists, store.ErrEntityNotFound, store.ErrConditionNotMet, store.ErrTableNotFound,
		odata.Detailf(odata.ErrInvalidInput, "Bad \"value\"\r\n--changesetresponse_x")}
	f.Fuzz(func(t *testing.T, ct string, body []byte, mode uint8) {
		br, err := readBatch(ct, body)
		if err != nil {
			if ae, _, known := lookupError(err); !known || ae.status != http.StatusBadRequest {
				t.Fatalf("refused with %d %s (%v), want a 400", ae.status, ae.code, err)
			}
			return
		}
		if br.query == nil && len(br.changeset) == 0 {
			return // the empty changeset: 202 with an empty answer
		}
		db := &fakeBatchStore{}
		if mode > 0 && br.query == nil {
			db.fail = &store.BatchError{Index: int(mode) % len(br.changeset), Err: failures[int(mode)%len(failures)]}
		}
		rq, rec := newBatchTestRequest(t, "", "")
		w := newBatchWriter()
		if err := rq.answerBatch(w, br, db); err != nil {
			t.Fatalf("answerBatch: %v", err)
		}
		if err := rq.sendBatch(w); err != nil {
			t.Fatal(err)
		}
		subs, err := parseBatchAnswer(rec.Code, rec.Header(), rec.Body.Bytes(), br.query != nil)
		if err != nil {
			t.Fatalf("unanswerable: %v\nrequest %q\nanswer %q", err, body, rec.Body.String())
		}
		if br.query != nil {
			if len(subs) != 1 {
				t.Fatalf("query batch answered with %d parts", len(subs))
			}
			return
		}
		failed := 0
		for _, s := range subs {
			if s.status >= 400 {
				failed++
			}
		}
		switch {
		case failed == 0 && len(subs) != len(br.changeset):
			t.Fatalf("%d operations, %d sub-responses", len(br.changeset), len(subs))
		case failed > 0 && len(subs) != 1:
			t.Fatalf("%d sub-responses with a failure among them", len(subs))
		case failed > 0 && (subs[0].index < 0 || subs[0].index >= len(br.changeset)):
			t.Fatalf("failure names operation %d of %d: %q", subs[0].index, len(br.changeset), subs[0].raw)
		case failed == 0 && db.calls != 1:
			t.Fatalf("answered success without running the batch")
		}
	})
}

func TestParseBatchAnswerRejects(t *testing.T) {
	t.Parallel()
	// The checker itself must catch what SDKs choke on.
	h := http.Header{"Content-Type": {"multipart/mixed; boundary=batchresponse_a"}}
	good := lines("--batchresponse_a", "Content-Type: multipart/mixed; boundary=changesetresponse_b", "",
		"--changesetresponse_b", "Content-Type: application/http", "Content-Transfer-Encoding: binary", "",
		"HTTP/1.1 204 No Content", "ETag: W/\"x\"", "", "", "--changesetresponse_b--", "--batchresponse_a--", "")
	if _, err := parseBatchAnswer(202, h, []byte(good), false); err != nil {
		t.Fatalf("good answer refused: %v", err)
	}
	for name, body := range map[string]string{
		"Preamble":     "\r\n" + good,
		"BracesIn204":  strings.Replace(good, `ETag: W/"x"`, `X: {"a":1}`, 1),
		"NoReason":     strings.Replace(good, "HTTP/1.1 204 No Content", "HTTP/1.1 2x4", 1),
		"HeaderBroken": strings.Replace(good, `ETag: W/"x"`, "ETag W/x", 1),
		"ErrorNotJSON": strings.Replace(good, "HTTP/1.1 204 No Content", "HTTP/1.1 400 Bad Request", 1),
	} {
		if _, err := parseBatchAnswer(202, h, []byte(body), false); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
