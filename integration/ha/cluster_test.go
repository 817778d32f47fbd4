package ha

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/internal/testserver"
	"github.com/pgtables/pgtables/migrations"
	"github.com/pgtables/pgtables/store"
)

// pgBin is where Debian installs PostgreSQL 15's programs.
const pgBin = "/usr/lib/postgresql/15/bin"

// needTools skips the test when a program it runs is missing, or fails it
// when require (set by CI, .ci/run) asks for the test.
func needTools(t *testing.T, require string, programs ...string) {
	t.Helper()
	for _, p := range append([]string{filepath.Join(pgBin, "pg_ctl")}, programs...) {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv(require) != "" {
				t.Fatalf("%s is not installed, and %s asks for this test", p, require)
			}
			t.Skipf("%s is not installed: this test did not run", p)
		}
	}
}

// sandbox is a directory for servers' data and logs, and the user that
// runs them: PostgreSQL and pg_autoctl refuse to run as root, so as root
// the servers run as postgres.
type sandbox struct {
	t    *testing.T
	dir  string
	cred *syscall.Credential // nil: run as ourselves
	uid  int
	gid  int
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgtables-ha-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &sandbox{t: t, dir: dir, uid: -1, gid: -1}
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and no user postgres to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.uid, s.gid = uid, gid
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	s.mkdir(".")
	return s
}

// mkdir makes a directory under the sandbox that its user owns.
func (s *sandbox) mkdir(rel string) string {
	s.t.Helper()
	p := filepath.Join(s.dir, rel)
	if err := os.MkdirAll(p, 0o700); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Chown(p, s.uid, s.gid); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// command is name with args, run as the sandbox's user with its own
// configuration directories (pg_autoctl keeps state there) and in a
// process group of its own, so that kill can end it and its children.
func (s *sandbox) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(),
		"HOME="+s.dir,
		"XDG_CONFIG_HOME="+filepath.Join(s.dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(s.dir, "data"),
		"XDG_RUNTIME_DIR="+filepath.Join(s.dir, "run"),
		"PATH="+pgBin+":"+os.Getenv("PATH"),
		"PG_CONFIG="+filepath.Join(pgBin, "pg_config"),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	return cmd
}

// run runs a command to its end and returns its output; failing fails the
// test.
func (s *sandbox) run(name string, args ...string) string {
	s.t.Helper()
	out, err := s.command(name, args...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start starts a long-running command, its output in log under the
// sandbox, and returns its process group; the test's end kills the group.
func (s *sandbox) start(log, name string, args ...string) int {
	s.t.Helper()
	f, err := os.Create(filepath.Join(s.dir, log))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := s.command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", name, err)
	}
	pgid := cmd.Process.Pid
	go func() { _ = cmd.Wait(); f.Close() }()
	s.t.Cleanup(func() { kill(pgid) })
	return pgid
}

// kill ends a process group started by start at once, as a crash would.
func kill(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// tail returns the end of a log under the sandbox, for failure messages.
func (s *sandbox) tail(log string) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, log))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// freePort fails the test when a port of the range is taken, which a
// server left over from an earlier run would do.
func freePort(t *testing.T, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("port %d is taken (a server left over from an earlier run?): %v", port, err)
	}
	ln.Close()
}

// pgtables is a pgtables server in the test's process on the database at
// dsn (migrated on start), with an SDK service client without retries.
type pgtables struct {
	url     string
	store   *store.Store
	srv     *httpapi.Server
	service *aztables.ServiceClient
}

func startPgtables(t *testing.T, dsn string) *pgtables {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migrations.Up(ctx, dsn); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s := testserver.Start(t, dsn, testserver.Config{
		// As the server does (serve.go): a client waits for a connection
		// a bounded time and then gets 503 rather than queueing while no
		// primary answers.
		AcquireWait: 5 * time.Second,
		// As PGTABLES_DB_FAILOVER_WAIT=20s: while no primary takes them,
		// reads and writes that certainly had no effect wait for one.
		Store: store.Options{FailoverWait: 20 * time.Second},
		HTTP:  httpapi.Config{RequestTimeout: 30 * time.Second},
		// The change feed's sequencer, as the server runs it.
		ChangeFeed: true,
	})
	p := &pgtables{url: s.URL, store: s.Store, srv: s.HTTP}
	cred, err := aztables.NewSharedKeyCredential(httpapi.DevAccount, httpapi.DevKey)
	if err != nil {
		t.Fatal(err)
	}
	// No SDK retries: every failure shows, with its status and code.
	opts := &aztables.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}}
	p.service, err = aztables.NewServiceClientWithSharedKey(p.url+"/"+httpapi.DevAccount, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ready returns the status of the server's /-/ready.
func (p *pgtables) ready() int {
	resp, err := http.Get(p.url + "/-/ready")
	if err != nil {
		return -1
	}
	resp.Body.Close()
	return resp.StatusCode
}
