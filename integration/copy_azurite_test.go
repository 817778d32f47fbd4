package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/tablecopy"
)

// startAzurite starts the table service of Azurite (npm azurite, the
// version pinned in testdata/azurite), in memory, on a free loopback port,
// and returns its connection string; it stops with the test. It needs
// Node: without it the test says so and passes, unless
// PGTABLES_REQUIRE_NODE is set, as CI sets it.
func startAzurite(t *testing.T) (string, bool) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missingClient(t, "PGTABLES_REQUIRE_NODE", "node is not installed")
		return "", false
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "azurite"))
	if err != nil {
		t.Fatal(err)
	}
	npmCI(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	cmd := exec.Command(node, filepath.Join("node_modules", "azurite", "dist", "src", "table", "main.js"),
		"--tableHost", "127.0.0.1", "--tablePort", strconv.Itoa(addr.Port), "--inMemoryPersistence", "--skipApiVersionCheck", "--silent")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(60 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr.String(), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Azurite never listened on %s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "DefaultEndpointsProtocol=http;AccountName=" + httpapi.DevAccount + ";AccountKey=" + httpapi.DevKey +
		";TableEndpoint=http://" + addr.String() + "/" + httpapi.DevAccount + ";", true
}

// Tables copied from pgtables into Azurite and from Azurite into another
// pgtables arrive with every entity, key, value and type: compared with
// -verify's comparison on each hop, and entity by entity, annotations and
// all, between the two pgtables. The subtests share one Azurite: it is
// slow to start on a busy machine.
func TestCopyAzurite(t *testing.T) {
	t.Parallel()
	conn, ok := startAzurite(t)
	if !ok {
		return
	}
	azurite, err := tablecopy.NewEndpoint(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("every type", func(t *testing.T) { copyAzuriteEveryType(t, azurite) })
	t.Run("bare whole Doubles", func(t *testing.T) { copyAzuriteBareDoubles(t, conn, azurite) })
}

func copyAzuriteEveryType(t *testing.T, azurite *tablecopy.Endpoint) {
	ctx := context.Background()
	src, dst := newEnv(t), newEnv(t)
	client, table := src.newTable()
	want := int64(fillCopySource(t, src, client, table, 20, 260)) // 5,202 entities
	from, err := tablecopy.NewEndpoint(src.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	to, err := tablecopy.NewEndpoint(dst.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	for _, hop := range []struct {
		name     string
		from, to *tablecopy.Endpoint
	}{
		{"pgtables to Azurite", from, azurite},
		{"Azurite to pgtables", azurite, to},
	} {
		results, err := tablecopy.Copy(ctx, hop.from, hop.to, tablecopy.Options{Tables: []string{table}})
		if err != nil || len(results) != 1 || results[0].Entities != want {
			t.Fatalf("%s: %+v %v; want %d entities", hop.name, results, err, want)
		}
		for _, c := range tablecopy.Verify(ctx, hop.from, hop.to, []string{table}, "") {
			if !c.Equal() || c.Source != want {
				t.Errorf("%s: verify: %+v", hop.name, c)
			}
		}
	}
	got, orig := typedEntities(t, dst, table), typedEntities(t, src, table)
	if int64(len(orig)) != want || !reflect.DeepEqual(got, orig) {
		for k, o := range orig {
			if g := got[k]; !reflect.DeepEqual(g, o) {
				t.Errorf("entity %q:\n got %v\nwant %v", k, g, o)
			}
		}
		t.Fatalf("%d entities arrived of %d", len(got), len(orig))
	}
}

// Whole numbers beyond the Int32 range written without an annotation (as
// a JavaScript client writes a whole-number Double) Azurite writes back
// bare, 27780995601534970000; a copy from Azurite into pgtables takes them
// for the Doubles they are, and -verify's comparison finds both sides
// equal rather than failing on an Int32 out of range.
func copyAzuriteBareDoubles(t *testing.T, conn string, azurite *tablecopy.Endpoint) {
	ctx := context.Background()
	endpoint := conn[strings.Index(conn, "TableEndpoint=")+len("TableEndpoint="):]
	endpoint = strings.TrimSuffix(strings.TrimSuffix(endpoint, ";"), "/"+httpapi.DevAccount)
	az := &env{t: t, baseURL: endpoint} // raw requests to Azurite
	table := fmt.Sprintf("bare%d%d", time.Now().UnixNano()%1e9, tableSeq.Add(1))
	if r := az.do("POST", "/"+httpapi.DevAccount+"/Tables", nil, []byte(`{"TableName":"`+table+`"}`)); r.status != 201 {
		t.Fatalf("create table in Azurite: %d %s", r.status, r.body)
	}
	for _, body := range []string{
		`{"PartitionKey":"p","RowKey":"1","Big":27780995601534970000,"Over":2147483648,"Under":-2147483649,"Int":7}`,
		`{"PartitionKey":"p","RowKey":"2","Neg":-27780995601534970000,"Max":2147483647}`,
	} {
		if r := az.do("POST", "/"+httpapi.DevAccount+"/"+table, map[string]string{"Prefer": "return-no-content"}, []byte(body)); r.status != 204 {
			t.Fatalf("insert into Azurite %s: %d %s", body, r.status, r.body)
		}
	}
	// What this test is about: Azurite writes them bare, with no type.
	r := az.do("GET", "/"+httpapi.DevAccount+"/"+table+"()", map[string]string{"Accept": "application/json;odata=fullmetadata"}, nil)
	if r.status != 200 || !bytes.Contains(r.body, []byte(`"Big":27780995601534970000`)) || bytes.Contains(r.body, []byte(`Big@odata.type`)) {
		t.Fatalf("Azurite's query: %d %s; want Big bare, without a type", r.status, r.body)
	}
	dst := newEnv(t)
	to, err := tablecopy.NewEndpoint(dst.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	results, err := tablecopy.Copy(ctx, azurite, to, tablecopy.Options{Tables: []string{table}})
	if err != nil || len(results) != 1 || results[0].Entities != 2 {
		t.Fatalf("copy: %+v %v; want 2 entities", results, err)
	}
	for _, c := range tablecopy.Verify(ctx, azurite, to, []string{table}, "") {
		if !c.Equal() || c.Source != 2 {
			t.Errorf("verify: %+v", c)
		}
	}
	got := typedEntities(t, dst, table)
	for _, w := range []struct {
		row, name, typ string
		value          float64
	}{
		{"1", "Big", "Edm.Double", 27780995601534970000},
		{"1", "Over", "Edm.Double", 2147483648},
		{"1", "Under", "Edm.Double", -2147483649},
		{"1", "Int", "", 7},
		{"2", "Neg", "Edm.Double", -27780995601534970000},
		{"2", "Max", "", 2147483647},
	} {
		ent := got["p\x00"+w.row]
		n, _ := ent[w.name].(json.Number)
		f, err := n.Float64()
		if typ, _ := ent[w.name+"@odata.type"].(string); typ != w.typ || err != nil || f != w.value {
			t.Errorf("%s/%s: %v of type %q in pgtables, want %v of type %q", w.row, w.name, ent[w.name], typ, w.value, w.typ)
		}
	}
}
