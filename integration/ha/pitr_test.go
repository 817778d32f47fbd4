package ha

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/jackc/pgx/v5"
)

// Ports of the point-in-time recovery test: the server backed up, and the
// one restored from its backup.
const (
	backedUpPort = 9793
	restoredPort = 9794
)

// TestPointInTimeRecovery follows the README's pgBackRest recipe: WAL
// archiving and a full backup of the server pgtables uses, writes before
// and after a point in time, a restore to that time into a new data
// directory, and pgtables started on it. Every write acknowledged before
// the time is there, none after; ETags from before the time are still
// accepted by If-Match, those from after are not.
func TestPointInTimeRecovery(t *testing.T) {
	needTools(t, requireHA, "pgbackrest")
	for _, p := range []int{backedUpPort, restoredPort} {
		freePort(t, p)
	}
	s := newSandbox(t)
	for _, d := range []string{"repo", "log", "lock", "spool"} {
		s.mkdir(d)
	}
	data, restored := filepath.Join(s.dir, "data"), filepath.Join(s.dir, "restored")
	conf := filepath.Join(s.dir, "pgbackrest.conf")
	writeFile(t, s, conf, fmt.Sprintf(`[global]
repo1-path=%[1]s/repo
repo1-retention-full=1
log-path=%[1]s/log
lock-path=%[1]s/lock
spool-path=%[1]s/spool
log-level-console=warn
start-fast=y

[pgtables]
pg1-path=%[2]s
pg1-port=%[3]d
pg1-socket-path=%[1]s
pg1-user=postgres
`, s.dir, data, backedUpPort))
	backrest := func(args ...string) string {
		return s.run("pgbackrest", append([]string{"--config=" + conf, "--stanza=pgtables"}, args...)...)
	}

	s.run(filepath.Join(pgBin, "initdb"), "-D", data, "-U", "postgres", "--auth", "trust")
	writeFile(t, s, filepath.Join(data, "postgresql.auto.conf"), fmt.Sprintf(`port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
wal_level = replica
archive_mode = on
archive_command = 'pgbackrest --config=%s --stanza=pgtables archive-push %%p'
`, backedUpPort, s.dir, conf))
	s.run(filepath.Join(pgBin, "pg_ctl"), "-D", data, "-l", filepath.Join(s.dir, "data.log"), "-w", "start")
	t.Cleanup(func() { _ = s.command(filepath.Join(pgBin, "pg_ctl"), "-D", data, "-m", "immediate", "stop").Run() })
	backrest("stanza-create")
	backrest("check")
	backrest("--type=full", "backup")
	backedUp := time.Now()

	ctx := context.Background()
	p := startPgtables(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", backedUpPort))
	const table, before, after = "pitr", 200, 100
	if _, err := p.service.CreateTable(ctx, table, nil); err != nil {
		t.Fatal(err)
	}
	c := p.service.NewClient(table)
	// Before the time: inserts, and an update of each tenth entity,
	// whose ETag the restored server must accept.
	etags := map[string]azcore.ETag{}
	for i := range before {
		rk := fmt.Sprintf("before%04d", i)
		r, err := c.AddEntity(ctx, entity(t, "p", rk, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		etags[rk] = r.ETag
		if i%10 == 0 {
			u, err := c.UpdateEntity(ctx, entity(t, "p", rk, 1), &aztables.UpdateEntityOptions{IfMatch: &r.ETag, UpdateMode: aztables.UpdateModeReplace})
			if err != nil {
				t.Fatal(err)
			}
			etags[rk] = u.ETag
		}
	}
	// Every write before is acknowledged, so committed, before target;
	// every write after begins after it. pgBackRest restores to a time
	// only from a backup whose stop time, in whole seconds and possibly
	// the next one, is before it: on a quick machine the writes before
	// take less than that.
	time.Sleep(max(50*time.Millisecond, 2*time.Second-time.Since(backedUp)))
	target := time.Now().UTC()
	time.Sleep(50 * time.Millisecond)
	later := map[string]azcore.ETag{}
	for i := range after {
		rk := fmt.Sprintf("after%04d", i)
		if _, err := c.AddEntity(ctx, entity(t, "p", rk, 0), nil); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			// A change after the time to an entity from before it.
			old := fmt.Sprintf("before%04d", i)
			etag := etags[old]
			u, err := c.UpdateEntity(ctx, entity(t, "p", old, 2), &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
			if err != nil {
				t.Fatal(err)
			}
			later[old] = u.ETag
		}
	}
	// check switches to a new WAL segment and waits for its archiving:
	// the writes after the time are in the archive.
	backrest("check")
	s.run(filepath.Join(pgBin, "pg_ctl"), "-D", data, "-m", "immediate", "stop")

	// The restore, into a new data directory.
	s.mkdir("restored")
	backrest("--pg1-path="+restored, "--type=time", "--target="+target.Format("2006-01-02 15:04:05.999999")+"+00",
		"--target-action=promote", "restore")
	s.run(filepath.Join(pgBin, "pg_ctl"), "-D", restored, "-l", filepath.Join(s.dir, "restored.log"), "-w",
		"-o", fmt.Sprintf("-p %d -c archive_mode=off", restoredPort), "start")
	t.Cleanup(func() { _ = s.command(filepath.Join(pgBin, "pg_ctl"), "-D", restored, "-m", "immediate", "stop").Run() })
	restoredURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", restoredPort)
	waitPromoted(t, s, restoredURL)

	q := startPgtables(t, restoredURL)
	rc := q.service.NewClient(table)
	var found, missing, stray int
	pager := rc.NewListEntitiesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Entities {
			_, rk := keysOf(t, b)
			switch {
			case strings.HasPrefix(rk, "after"):
				stray++
			default:
				found++
			}
		}
	}
	missing = before - found
	if missing != 0 || stray != 0 {
		t.Errorf("restored: %d of the %d writes before the time missing, %d of the %d after present", missing, before, stray, after)
	}
	// ETags: the one current at the time is valid again; one given after
	// the time names a version the restored server never had.
	var kept, refused int
	for old, etag := range later {
		_, err := rc.UpdateEntity(ctx, entity(t, "p", old, 3), &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		var re *azcore.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusPreconditionFailed {
			t.Errorf("If-Match with %s's ETag from after the time: %v, want 412", old, err)
			continue
		}
		refused++
		etag = etags[old]
		if _, err := rc.UpdateEntity(ctx, entity(t, "p", old, 3), &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace}); err != nil {
			t.Errorf("If-Match with %s's ETag from before the time: %v", old, err)
			continue
		}
		kept++
	}
	t.Logf("point-in-time restore to %s: %d of %d writes before the time present, %d of %d after; ETags from before accepted %d, from after refused (412) %d",
		target.Format(time.RFC3339Nano), found, before, stray, after, kept, refused)
}

// writeFile writes a file that the sandbox's user owns.
func writeFile(t *testing.T, s *sandbox, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, s.uid, s.gid); err != nil {
		t.Fatal(err)
	}
}

// waitPromoted waits until the restored server has ended recovery.
func waitPromoted(t *testing.T, s *sandbox, url string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			var rec bool
			err = conn.QueryRow(context.Background(), "SELECT pg_is_in_recovery()").Scan(&rec)
			conn.Close(context.Background())
			if err == nil && !rec {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("restored server not promoted: %v\n%s", err, s.tail("restored.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
