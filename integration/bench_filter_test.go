package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/odata"
)

// BenchmarkFilter1M measures filtered queries through the aztables client
// against a real server, on a table of 1,000,000 entities spread over 1,000
// partitions (p0..p999, each with RowKeys r0000..r0999):
//
//	go test ./integration -run '^$' -bench Filter1M -benchtime 3s
//
// Each run loads the table into a fresh schema (dropped at the end) with
// INSERT ... SELECT generate_series in the stored form of store/doc.go, then
// VACUUM ANALYZE; it prints the load time. Each query runs through the
// aztables client (SDK/...) and over raw HTTP (HTTP/...), following
// continuations to the end; sub-benchmarks report the mean latency as ns/op
// and the median and 99th percentile as p50-µs and p99-µs. Each query checks
// its result, so that a wrong answer fails instead of looking fast.
//
// The two table-wide sub-benchmarks show the cost of filters that no index
// narrows: every page of them is bounded (1000 matches or the 5 s scan
// budget), and each op follows the continuations to the end.
func BenchmarkFilter1M(b *testing.B) {
	const parts, perPart = 1000, 1000
	e := newEnv(b)
	c, name := e.newTable()

	start := time.Now()
	var tableID int64
	if err := e.pool.QueryRow(bg, `SELECT id FROM tables WHERE lname = lower($1) AND deleted_at IS NULL`, name).Scan(&tableID); err != nil {
		b.Fatal(err)
	}
	// Properties: N (Int32, the RowKey's number), Name (String), Big
	// (Int64), Ratio (Double), Flag (Boolean), When (DateTime); size by
	// Azure's formula for these names and values.
	const load = `
INSERT INTO entities (table_id, dkey, pk, rk, ts, size, props)
SELECT $1, entity_dkey(t.account, t.lname, 'p' || (g / 1000)), 'p' || (g / 1000), 'r' || lpad((g % 1000)::text, 4, '0'), $2, 0, jsonb_build_object(
    'N', jsonb_build_array('i32', g % 1000),
    'Name', jsonb_build_array('str', 'name-' || g),
    'Big', jsonb_build_array('i64', (g::bigint * 1000003)::text),
    'Ratio', jsonb_build_array('dbl', ((g % 1000) / 8.0)::float8::text),
    'Flag', jsonb_build_array('bool', g % 2 = 0),
    'When', jsonb_build_array('dt', to_char(timestamp '2024-01-01' + g * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS') || '.0000000Z'))
FROM tables t, generate_series($3::int, $4::int - 1) g WHERE t.id = $1`
	const chunk = 100_000
	ts := odata.Ticks(time.Now())
	for lo := 0; lo < parts*perPart; lo += chunk {
		if _, err := e.pool.Exec(bg, load, tableID, ts, lo, lo+chunk); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(bg, `
UPDATE entities SET size = 4 + 2 * (length(pk) + length(rk)) + 14 + 20 + 2 * length(props->'Name'->>1) + 22 + 26 + 17 + 24
WHERE table_id = $1`, tableID); err != nil {
		b.Fatal(err)
	}
	if _, err := e.pool.Exec(bg, `VACUUM (ANALYZE) entities`); err != nil {
		b.Fatal(err)
	}
	// Printed rather than logged: go test shows no log of a benchmark
	// that has sub-benchmarks.
	fmt.Printf("BenchmarkFilter1M: loaded %d entities in %d partitions in %v\n", parts*perPart, parts, time.Since(start).Round(time.Millisecond))

	// The stored form must read back as what the load meant.
	got, _ := getEDM(b, c, "p500", "r0042")
	want := map[string]any{"N": int32(42), "Name": "name-500042", "Big": aztables.EDMInt64(500042 * 1000003),
		"Ratio": 5.25, "Flag": true, "When": aztables.EDMDateTime(time.Date(2024, 1, 6, 18, 54, 2, 0, time.UTC))}
	if fmt.Sprint(got.Properties) != fmt.Sprint(want) {
		b.Fatalf("p500/r0042 = %v, want %v", got.Properties, want)
	}

	// Queries go through the SDK as applications send them, and over raw
	// HTTP, which leaves out the SDK's own cost (it decodes and re-encodes
	// every entity).
	queries := []struct {
		name   string
		filter func(rng *rand.Rand) (filter string, want int)
	}{
		{"PointQuery", func(rng *rand.Rand) (string, int) {
			return fmt.Sprintf("PartitionKey eq 'p%d' and RowKey eq 'r%04d'", rng.IntN(parts), rng.IntN(perPart)), 1
		}},
		{"PartitionScan", func(rng *rand.Rand) (string, int) {
			return fmt.Sprintf("PartitionKey eq 'p%d'", rng.IntN(parts)), perPart
		}},
		{"PropertyInPartition", func(rng *rand.Rand) (string, int) {
			return fmt.Sprintf("PartitionKey eq 'p%d' and N gt 990", rng.IntN(parts)), 9
		}},
		{"RowKeyAcrossTable", func(rng *rand.Rand) (string, int) {
			return fmt.Sprintf("RowKey eq 'r%04d'", rng.IntN(perPart)), parts
		}},
		{"PropertyAcrossTable", func(rng *rand.Rand) (string, int) {
			return fmt.Sprintf("N eq %d", rng.IntN(perPart)), parts
		}},
	}
	clients := []struct {
		name string
		run  func(filter string) (int, error)
	}{
		{"SDK", func(f string) (int, error) { return benchSDKQuery(c, f) }},
		{"HTTP", func(f string) (int, error) { return benchHTTPQuery(e, name, f) }},
	}
	for _, cl := range clients {
		for _, q := range queries {
			b.Run(cl.name+"/"+q.name, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				var lat []time.Duration
				for b.Loop() {
					f, want := q.filter(rng)
					t0 := time.Now()
					n, err := cl.run(f)
					lat = append(lat, time.Since(t0))
					if err != nil {
						b.Fatalf("%s: %v", f, err)
					}
					if n != want {
						b.Fatalf("%s: %d entities, want %d", f, n, want)
					}
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
			})
		}
	}
}

// benchSDKQuery follows a filtered query to its end with the SDK's pager
// and returns the number of entities.
func benchSDKQuery(c *aztables.Client, filter string) (int, error) {
	n := 0
	p := c.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: to.Ptr(filter)})
	for p.More() {
		page, err := p.NextPage(bg)
		if err != nil {
			return n, err
		}
		if len(page.Entities) > 0 && !bytes.Contains(page.Entities[0], []byte(`"Name":"name-`)) {
			return n, fmt.Errorf("entity without its properties: %s", page.Entities[0])
		}
		n += len(page.Entities)
	}
	return n, nil
}

// benchHTTPQuery is benchSDKQuery over raw HTTP.
func benchHTTPQuery(e *env, table, filter string) (int, error) {
	base := "/" + httpapi.DevAccount + "/" + table + "()"
	query := "$filter=" + url.QueryEscape(filter)
	n := 0
	for q := query; ; {
		req, err := http.NewRequest("GET", e.baseURL+base+"?"+q, nil)
		if err != nil {
			return n, err
		}
		date := time.Now().UTC().Format(http.TimeFormat)
		req.Header.Set("x-ms-date", date)
		req.Header.Set("x-ms-version", "2019-02-02")
		req.Header.Set("Accept", "application/json;odata=nometadata")
		req.Header.Set("Authorization", "SharedKeyLite "+httpapi.DevAccount+":"+signLite(date, base, q))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return n, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return n, err
		}
		if resp.StatusCode != 200 {
			return n, fmt.Errorf("status %d: %s", resp.StatusCode, trunc(body))
		}
		var page struct{ Value []json.RawMessage }
		if err := json.Unmarshal(body, &page); err != nil {
			return n, err
		}
		if len(page.Value) > 0 && !bytes.Contains(page.Value[0], []byte(`"Name":"name-`)) {
			return n, fmt.Errorf("entity without its properties: %s", page.Value[0])
		}
		n += len(page.Value)
		npk, nrk := resp.Header.Get("x-ms-continuation-NextPartitionKey"), resp.Header.Get("x-ms-continuation-NextRowKey")
		if npk == "" {
			return n, nil
		}
		q = query + "&NextPartitionKey=" + url.QueryEscape(npk) + "&NextRowKey=" + url.QueryEscape(nrk)
	}
}
