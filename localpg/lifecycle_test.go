package localpg

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// serverBinaries finds this machine's PostgreSQL server binaries. Without
// them the test skips, unless PGTABLES_REQUIRE_PG_SERVER is set (as in
// CI), where it fails.
func serverBinaries(t *testing.T) Finder {
	t.Helper()
	f := Finder{Path: os.Getenv("PATH"), Patterns: DefaultPatterns()}
	if _, err := f.Find(context.Background(), 0); err != nil {
		if os.Getenv("PGTABLES_REQUIRE_PG_SERVER") != "" {
			t.Fatalf("PGTABLES_REQUIRE_PG_SERVER is set: %v", err)
		}
		t.Skipf("no PostgreSQL server binaries: %v", err)
	}
	return f
}

// reachableDir is a new empty directory that the server's user can reach
// when the test runs as root (t.TempDir's directories are private).
func reachableDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// testLog is a logger writing into the test's log.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// startT starts a server and stops it when the test ends.
func startT(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func exec1(t *testing.T, s *Server, sql string, args ...any) {
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

func count(t *testing.T, s *Server) int {
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
	finder := serverBinaries(t)
	dir := filepath.Join(reachableDir(t), strings.Repeat("long-directory-name-", 5), "data")
	if len(dir) <= maxSocketPath {
		t.Fatalf("%s is not long enough", dir)
	}
	cfg := Config{Dir: dir, Finder: finder, Log: testLog(t)}
	first := startT(t, cfg)
	if strings.Contains(first.URL(), "long-directory-name") {
		t.Errorf("socket under the long directory: %s", first.URL())
	}
	sockDir := first.socket()
	exec1(t, first, `CREATE TABLE kept (n int)`)
	exec1(t, first, `INSERT INTO kept VALUES (1)`)

	if s, err := Start(context.Background(), cfg); err == nil {
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
	orphanPID := second.cmd.Process.Pid
	second.lock.Close()
	second.lock = nil
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
	pidFile := filepath.Join(dir, clusterDir, "postmaster.pid")
	for _, pid := range []int{sleeper.Process.Pid, gone.Process.Pid} {
		if err := os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"+filepath.Join(dir, clusterDir)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The server's, as the server would have written it.
		if uid, gid, ok := owner(filepath.Join(dir, clusterDir)); ok {
			if err := os.Chown(pidFile, int(uid), int(gid)); err != nil {
				t.Fatal(err)
			}
		}
		s := startT(t, cfg)
		if n := count(t, s); n != 2 {
			t.Errorf("%d rows with a lock file naming pid %d, want 2", n, pid)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if !alive(sleeper.Process.Pid) {
		t.Error("the unrelated process was signalled")
	}
}

// An ephemeral server runs with durability off in a directory of its
// own, which Stop removes.
func TestEphemeral(t *testing.T) {
	t.Parallel()
	s := startT(t, Config{Ephemeral: true, Finder: serverBinaries(t), Log: testLog(t)})
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

// A directory holding something else is refused before anything is
// written into it.
func TestForeignDirectoryRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Config{Dir: dir, Finder: Finder{Path: ""}})
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Start in a foreign directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, clusterDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a cluster was made in a foreign directory: %v", err)
	}
}
