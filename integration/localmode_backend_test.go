package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/pgtables/pgtables/internal/testdb"
)

// With PGTABLES_TEST_BACKEND=local the suite's tests that talk to
// pgtables only over HTTP run against one pgtables binary in local mode:
// started with -ephemeral, a free port and an environment of PATH alone,
// so with no database configured, beside the machine's own PostgreSQL.
// Tests that need the database, a server of their own configuration or a
// restart skip there (needInProcess): the postgres and Citus runs have
// them. PGTABLES_TEST_LOCAL_BIN names a pgtables binary to use; without
// it the tests build ./cmd/pgtables.

// localServer is the pgtables process of the local backend.
type localServer struct {
	cmd    *exec.Cmd
	dir    string // the binary, the process's HOME and TMPDIR
	base   string
	logs   *logBuffer
	exited chan error
}

var (
	localOnce sync.Once
	local     *localServer
	localErr  error
)

// TestMain stops the local backend's pgtables, when one was started,
// after the tests: it must exit 0 on SIGTERM and leave no files behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if local != nil {
		if err := local.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "local mode pgtables: %v\n%s", err, local.logs)
			code = 1
		} else if code != 0 {
			fmt.Fprintf(os.Stderr, "local mode pgtables's log:\n%s", local.logs)
		}
		_ = os.RemoveAll(local.dir)
	}
	os.Exit(code)
}

// needInProcess skips a test that needs what only an in-process server
// has (its database, its configuration, a restart) on the local backend.
func needInProcess(tb testing.TB) {
	tb.Helper()
	if testdb.Local() {
		tb.Skip("needs the in-process server (its database or configuration); PGTABLES_TEST_BACKEND=local reaches pgtables over HTTP only")
	}
}

// newLocalEnv is an env on the local backend's pgtables, started on the
// first call. It has no pool, store or server: e.pool and the like are
// for tests that call needInProcess.
func newLocalEnv(t testing.TB) *env {
	t.Helper()
	localOnce.Do(func() { local, localErr = startLocal() })
	if localErr != nil {
		t.Fatalf("local backend: %v", localErr)
	}
	select {
	case err := <-local.exited:
		local.exited <- err
		t.Fatalf("local mode pgtables exited: %v\n%s", err, local.logs)
	default:
	}
	e := &env{t: t, baseURL: local.base, stop: func() {}}
	e.connect()
	return e
}

// startLocal builds pgtables unless PGTABLES_TEST_LOCAL_BIN names it, and
// runs it in ephemeral local mode until it is ready.
func startLocal() (_ *localServer, err error) {
	dir, err := os.MkdirTemp("", "pgtables-localsuite-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	// The server's user must reach the directory when the tests run as
	// root (local mode then runs PostgreSQL as another user).
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	bin := os.Getenv("PGTABLES_TEST_LOCAL_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "pgtables")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/pgtables/pgtables/cmd/pgtables").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("build pgtables: %v\n%s", err, out)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &localServer{dir: dir, base: "http://" + addr, logs: &logBuffer{}, exited: make(chan error, 1)}
	s.cmd = exec.Command(bin, "-ephemeral")
	// No PGTABLES_DATABASE_URL and no PG* variables: local mode.
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + dir,
		"PGTABLES_LISTEN=" + addr, "PGTABLES_LOG_LEVEL=warn", "PGTABLES_ACCESS_LOG=false"}
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.exited <- s.cmd.Wait() }()
	// Creating a cluster takes seconds on a busy machine.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(s.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.exited:
			s.exited <- err
			return nil, fmt.Errorf("pgtables exited (%v) before it was ready:\n%s", err, s.logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.cmd.Process.Kill()
			return nil, fmt.Errorf("%s never ready:\n%s", s.base, s.logs)
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (s *localServer) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-s.exited:
		if err != nil {
			return fmt.Errorf("exit after SIGTERM: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("no exit within a minute of SIGTERM")
	}
}

// wantPool fails a test that reads the database on the local backend,
// where there is none to read: such a test calls needInProcess first.
func (e *env) wantPool() {
	e.t.Helper()
	if e.pool == nil {
		e.t.Fatal("reads the database, which the local backend does not reach: call needInProcess")
	}
}

// servedRows is every entity of a table as the server answers it, keyed
// "pk/rk", with its ETag, Timestamp and properties: where the tests do not
// reach the database (the local backend), equal answers mean nothing was
// written. A table that does not exist has none.
func (e *env) servedRows(table string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	pager := e.service.NewClient(table).NewListEntitiesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			var re *azcore.ResponseError
			if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
				return out
			}
			e.t.Fatalf("read table %s: %v", table, err)
		}
		for _, raw := range page.Entities {
			var key struct{ PartitionKey, RowKey string }
			if err := json.Unmarshal(raw, &key); err != nil {
				e.t.Fatal(err)
			}
			out[key.PartitionKey+"/"+key.RowKey] = string(raw)
		}
	}
	return out
}

// sortedValues is m's values in the order of their keys.
func sortedValues(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = m[k]
	}
	return vals
}
