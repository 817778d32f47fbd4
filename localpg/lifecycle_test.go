//go:build unix

package localpg_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/internal/testlocalpg"
	"github.com/pgtables/pgtables/localpg"
)

// testLog is a logger writing into the test's log.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// startT starts a server and stops it when the test ends.
func startT(t *testing.T, cfg localpg.Config) *localpg.Server {
	t.Helper()
	s, err := localpg.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func exec1(t *testing.T, s *localpg.Server, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, s *localpg.Server) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM kept`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The cluster outlives its servers; a directory whose path is too long
// for a socket gets its socket elsewhere; a second server on the same
// directory is refused; a server left running by a dead pgtables is
// stopped, and lock files naming dead or unrelated processes are no
// obstacle.
func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	finder := testlocalpg.Finder(t)
	dir := filepath.Join(testlocalpg.Dir(t), strings.Repeat("long-directory-name-", 5), "data")
	if len(dir) < 108 {
		t.Fatalf("%s is not too long for a socket", dir)
	}
	cfg := localpg.Config{Dir: dir, Finder: finder, Log: testLog(t)}
	first := startT(t, cfg)
	if strings.Contains(first.URL(), "long-directory-name") {
		t.Errorf("socket under the long directory: %s", first.URL())
	}
	pc, err := pgx.ParseConfig(first.URL())
	if err != nil {
		t.Fatal(err)
	}
	sockDir := pc.Host
	exec1(t, first, `CREATE TABLE kept (n int)`)
	exec1(t, first, `INSERT INTO kept VALUES (1)`)

	if s, err := localpg.Start(context.Background(), cfg); err == nil {
		s.Stop()
		t.Fatal("a second server started on the same directory")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("second server: %v", err)
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(sockDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket directory %s left behind: %v", sockDir, err)
	}

	// A pgtables that died leaves its server running without the lock.
	second := startT(t, cfg)
	exec1(t, second, `INSERT INTO kept VALUES (2)`)
	orphanPID := second.Abandon()
	third := startT(t, cfg)
	select {
	case <-second.Exited():
	default:
		t.Fatalf("the earlier server (pid %d) is still running", orphanPID)
	}
	if n := count(t, third); n != 2 {
		t.Errorf("%d rows after the takeover, want 2", n)
	}
	if err := third.Stop(); err != nil {
		t.Fatal(err)
	}

	// Lock files of PostgreSQL naming a process that is not a server, and
	// one that is gone.
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	cluster := filepath.Join(dir, "postgresql")
	pidFile := filepath.Join(cluster, "postmaster.pid")
	for _, pid := range []int{sleeper.Process.Pid, gone.Process.Pid} {
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"+cluster+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The server's, as the server would have written it.
		fi, err := os.Stat(cluster)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if err := os.Chown(pidFile, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
		s := startT(t, cfg)
		if n := count(t, s); n != 2 {
			t.Errorf("%d rows with a lock file naming pid %d, want 2", n, pid)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if !localpg.Running(sleeper.Process.Pid) {
		t.Error("the unrelated process was signalled")
	}
}

// An ephemeral server runs with durability off in a directory of its
// own, which Stop removes; starting, it removes the directories of
// ephemeral servers whose pgtables died, and those only.
func TestEphemeral(t *testing.T) {
	t.Parallel()
	finder := testlocalpg.Finder(t)
	tmp := testlocalpg.Dir(t)
	old := time.Now().Add(-time.Hour)
	dirs := map[string]bool{} // name: whether it must remain
	for name, remains := range map[string]bool{
		"pgtables-ephemeral-abandoned": false,
		"pgtables-ephemeral-held":      true, // its pgtables runs
		"pgtables-ephemeral-new":       true, // its pgtables is about to lock it
		"something-else":               true,
	} {
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(dir, "postgresql"), 0o700); err != nil {
			t.Fatal(err)
		}
		if name == "pgtables-ephemeral-held" {
			f, err := os.OpenFile(filepath.Join(dir, "pgtables.lock"), os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
		}
		if name != "pgtables-ephemeral-new" {
			if err := os.Chtimes(dir, old, old); err != nil {
				t.Fatal(err)
			}
		}
		dirs[name] = remains
	}
	s := startT(t, localpg.Config{Ephemeral: true, TempDir: tmp, Finder: finder, Log: testLog(t)})
	for name, remains := range dirs {
		if _, err := os.Stat(filepath.Join(tmp, name)); (err == nil) != remains {
			t.Errorf("%s: remains %v (%v), want %v", name, err == nil, err, remains)
		}
	}
	conn, err := pgx.Connect(context.Background(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, setting := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(context.Background(), "SELECT current_setting($1)", setting).Scan(&v); err != nil || v != "off" {
			t.Errorf("%s = %q (%v), want off", setting, v, err)
		}
	}
	var listen string
	if err := conn.QueryRow(context.Background(), "SELECT current_setting('listen_addresses')").Scan(&listen); err != nil || listen != "" {
		t.Errorf("listen_addresses = %q (%v), want none", listen, err)
	}
	conn.Close(context.Background())
	dir := s.Dir()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ephemeral directory %s left behind: %v", dir, err)
	}
}

// A directory holding something else (a volume's lost+found aside) is
// refused before anything is written into it.
func TestForeignDirectoryRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A volume's lost+found is no obstacle: the binaries' absence is next.
	volume := t.TempDir()
	if err := os.Mkdir(filepath.Join(volume, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := localpg.Start(context.Background(), localpg.Config{Dir: volume, Finder: localpg.Finder{Path: ""}}); !errors.Is(err, localpg.ErrNotFound) {
		t.Errorf("Start on a fresh volume without binaries: %v, want ErrNotFound", err)
	}
	_, err := localpg.Start(context.Background(), localpg.Config{Dir: dir, Finder: localpg.Finder{Path: ""}})
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Start in a foreign directory: %v", err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("the foreign directory changed: %v %v", entries, err)
	}
}
