package integration

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	npmCI(ctx, t, dir)
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
// all, between the two pgtables.
func TestCopyAzurite(t *testing.T) {
	t.Parallel()
	conn, ok := startAzurite(t)
	if !ok {
		return
	}
	ctx := context.Background()
	src, dst := newEnv(t), newEnv(t)
	client, table := src.newTable()
	want := int64(fillCopySource(t, src, client, table, 20, 260)) // 5,202 entities
	from, err := tablecopy.NewEndpoint(src.connectionString())
	if err != nil {
		t.Fatal(err)
	}
	azurite, err := tablecopy.NewEndpoint(conn)
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
