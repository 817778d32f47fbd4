package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testserver"
)

// `pgtables changes` prints a table's changes as JSON lines from the
// oldest, resumes from its checkpoint with only what came after, follows
// until stopped, and refuses what it cannot do.
func TestChangesCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testserver.Start(t, testserver.Database(t), testserver.Config{})
	connStr := "AccountName=" + httpapi.DevAccount + ";AccountKey=" + httpapi.DevKey + ";TableEndpoint=" + srv.URL + "/" + httpapi.DevAccount
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := aztables.NewServiceClientWithSharedKey(srv.URL+"/"+httpapi.DevAccount, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateTable(ctx, "Feed", nil); err != nil {
		t.Fatal(err)
	}
	tc := svc.NewClient("Feed")
	put := func(rk string, age int64) {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"PartitionKey": "p", "RowKey": rk, "Age": age, "Age@odata.type": "Edm.Int64"})
		if _, err := tc.UpsertEntity(ctx, body, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := func(ctx context.Context, args ...string) ([]map[string]any, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"changes", "-connection-string", connStr}, args...), env(nil), &out, io.Discard)
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if jerr := json.Unmarshal([]byte(l), &m); jerr != nil {
				t.Fatalf("line %q: %v", l, jerr)
			}
			lines = append(lines, m)
		}
		return lines, err
	}
	summary := func(lines []map[string]any) string {
		var s []string
		for _, l := range lines {
			s = append(s, l["op"].(string)+":"+l["RowKey"].(string))
		}
		return strings.Join(s, " ")
	}

	put("a", 1)
	put("a", 2)
	put("b", 3)
	if _, err := tc.DeleteEntity(ctx, "p", "b", nil); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "cursor")
	lines, err := cmd(ctx, "-table", "Feed", "-from", "oldest", "-checkpoint", cp)
	if err != nil || summary(lines) != "insert:a replace:a insert:b delete:b" {
		t.Fatalf("from oldest: %q %v", summary(lines), err)
	}
	if e, _ := lines[1]["entity"].(map[string]any); e["Age"] != "2" || e["Age@odata.type"] != "Edm.Int64" || lines[1]["etag"] == nil || lines[3]["entity"] != nil {
		t.Errorf("changes: %v", lines)
	}
	put("c", 4)
	if lines, err := cmd(ctx, "-table", "Feed", "-from", "oldest", "-checkpoint", cp); err != nil || summary(lines) != "insert:c" {
		t.Errorf("resumed from the checkpoint: %q %v", summary(lines), err)
	}
	if lines, err := cmd(ctx, "-table", "Feed"); err != nil || len(lines) != 0 {
		t.Errorf("from now, caught up at once: %q %v", summary(lines), err)
	}

	// A table SAS that reads the table does, through the connection
	// string; one that only adds does not.
	for perms, ok := range map[string]bool{"r": true, "a": false} {
		sas, err := aztables.SASSignatureValues{TableName: "Feed", Permissions: perms, ExpiryTime: time.Now().Add(time.Hour)}.Sign(cred)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = run(ctx, []string{"changes", "-connection-string", "SharedAccessSignature=" + sas + ";TableEndpoint=" + srv.URL + "/" + httpapi.DevAccount,
			"-table", "Feed", "-from", "oldest"}, env(nil), &out, io.Discard)
		if ok && (err != nil || strings.Count(out.String(), "\n") != 5) || !ok && (err == nil || !strings.Contains(err.Error(), "403")) {
			t.Errorf("SAS sp=%s: %v, %d lines", perms, err, strings.Count(out.String(), "\n"))
		}
	}

	// -follow waits for new changes until stopped.
	fctx, stop := context.WithCancel(ctx)
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(fctx, []string{"changes", "-connection-string", connStr, "-table", "Feed", "-checkpoint", cp, "-follow", "-wait", "2s"}, env(nil), &out, io.Discard)
	}()
	put("d", 5)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), `"RowKey":"d"`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), `"RowKey":"d"`) {
		t.Errorf("-follow: %q %v", out.String(), err)
	}

	for _, args := range [][]string{
		{"-table", "NoSuchTable"},
		{"-table", "Feed", "-from", "not-a-cursor"},
		{"-table", "Feed", "-limit", "5000"},
		{},
		{"-table", "Feed", "extra"},
	} {
		if _, err := cmd(ctx, args...); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if err := run(ctx, []string{"changes", "-table", "Feed"}, env(nil), io.Discard, io.Discard); err == nil {
		t.Error("no connection string: no error")
	}
}
