// Package localpg runs a private PostgreSQL server for pgtables' local
// mode: it finds the server binaries, creates a cluster in a data
// directory, starts it on a Unix socket only (no TCP port), and stops it.
//
// The data directory holds:
//
//	postgresql/      the cluster (PGDATA), made by initdb on first start
//	postgresql.log   the server's log
//	pgtables.lock    locked while a pgtables runs on the directory
//	.s.PGSQL.5432    the socket, unless the path is too long for one
//
// The cluster trusts every connection, which is safe because it has no TCP
// listener and its socket is readable by its owner alone.
//
// Crash safety: a pgtables killed with SIGKILL leaves its server behind on
// systems without a parent-death signal (and, for a moment, on Linux,
// where the server gets one). The next Start finds it through the
// cluster's postmaster.pid, checks it is a PostgreSQL on this very
// directory, and stops it before starting its own; a dead one's lock file
// is left for PostgreSQL, which recovers. The lock file pgtables.lock
// keeps two pgtables from sharing a directory.
//
// PostgreSQL refuses to run as root. Started as root, Start runs initdb
// and the server as the data directory's owner when that is not root,
// else as the user postgres, else nobody, and hands the directory over to
// that user.
package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Names inside the data directory.
const (
	clusterDir = "postgresql"
	logFile    = "postgresql.log"
	lockFile   = "pgtables.lock"
	// initDir is where initdb works; renamed to clusterDir once complete,
	// so that an interrupted initdb leaves no half-made cluster behind.
	initDir = "postgresql.init"
)

// ephemeralPrefix begins the names of ephemeral clusters' directories.
const ephemeralPrefix = "pgtables-ephemeral-"

// abandonedAge is how old an ephemeral directory nobody holds must be to
// be taken for abandoned: a new one is unlocked for a moment.
const abandonedAge = time.Minute

// port names the socket file; the server listens on no TCP port.
const port = 5432

// maxSocketPath is the longest socket path used: the kernel's limit is
// 107 bytes on Linux and 103 on macOS, and PostgreSQL adds ".lock".
const maxSocketPath = 100

// dbUser is the cluster's superuser, whatever the operating system user.
const dbUser = "pgtables"

// Timeouts of the server's start and stop.
const (
	readyTimeout = 2 * time.Minute
	stopTimeout  = time.Minute
	quitTimeout  = 10 * time.Second
)

// Config is how to run the server.
type Config struct {
	// Dir is the data directory; made when missing. Ignored when
	// Ephemeral.
	Dir string
	// Ephemeral runs a throwaway cluster in a new temporary directory,
	// removed by Stop, without crash safety (fsync, synchronous_commit
	// and full_page_writes off): for tests and CI, never for data to keep.
	Ephemeral bool
	// TempDir is where an ephemeral cluster's directory goes; empty:
	// os.TempDir(). The directories of ephemeral clusters whose pgtables
	// died there are removed when the next one starts.
	TempDir string
	// Finder finds the server binaries.
	Finder Finder
	// Log receives the lifecycle's events.
	Log *slog.Logger
}

// account is an operating system user to run the server as.
type account struct{ uid, gid uint32 }

// Server is a running private PostgreSQL.
type Server struct {
	dir     string
	sockDir string // "" when the socket is in dir
	bin     Binaries
	cmd     *exec.Cmd
	lock    *os.File
	log     *slog.Logger
	logOut  *os.File
	eph     bool
	exited  chan struct{}
	waitErr error
}

// Start starts the server and returns once it accepts connections. On
// error nothing is left running.
func Start(ctx context.Context, cfg Config) (srv *Server, err error) {
	s := &Server{log: cfg.Log, eph: cfg.Ephemeral, exited: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	defer func() {
		if err != nil {
			_ = s.stopProcess()
			s.cleanup()
		}
	}()
	if cfg.Ephemeral {
		sweepEphemeral(cfg.TempDir, s.log)
		if s.dir, err = os.MkdirTemp(cfg.TempDir, ephemeralPrefix); err != nil {
			return nil, fmt.Errorf("temporary directory: %w", err)
		}
	} else {
		if s.dir, err = filepath.Abs(cfg.Dir); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		// Directories above it as mkdir -p makes them; itself private.
		if err = os.MkdirAll(filepath.Dir(s.dir), 0o755); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		if err = os.Mkdir(s.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	}
	// Checked before the lock file goes in: a foreign directory is left as
	// it was.
	if err := checkContents(s.dir); err != nil {
		return nil, err
	}
	if s.lock, err = lockDir(s.dir); err != nil {
		return nil, err
	}
	pgdata := filepath.Join(s.dir, clusterDir)
	want := 0
	if b, err := os.ReadFile(filepath.Join(pgdata, "PG_VERSION")); err == nil {
		want, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if s.bin, err = cfg.Finder.Find(ctx, want); err != nil {
		return nil, err
	}
	runAs, err := serverUser(pgdata)
	if err != nil {
		return nil, err
	}
	if runAs != nil {
		if err := reachable(s.dir, runAs); err != nil {
			return nil, err
		}
		if err := os.Chown(s.dir, int(runAs.uid), int(runAs.gid)); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	}
	if s.logOut, err = os.OpenFile(filepath.Join(s.dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("server log: %w", err)
	}
	if runAs != nil {
		if err := s.logOut.Chown(int(runAs.uid), int(runAs.gid)); err != nil {
			return nil, fmt.Errorf("server log: %w", err)
		}
	}
	if _, err := os.Stat(pgdata); errors.Is(err, os.ErrNotExist) {
		if err := s.initdb(ctx, runAs); err != nil {
			return nil, err
		}
	}
	if err := s.clearStale(pgdata); err != nil {
		return nil, err
	}
	// A comma would split the host into several for libpq and pgx.
	if len(filepath.Join(s.dir, ".s.PGSQL.5432.lock")) > maxSocketPath || strings.Contains(s.dir, ",") {
		if s.sockDir, err = os.MkdirTemp("", "pgt"); err != nil {
			return nil, fmt.Errorf("socket directory: %w", err)
		}
		if runAs != nil {
			if err := os.Chown(s.sockDir, int(runAs.uid), int(runAs.gid)); err != nil {
				return nil, fmt.Errorf("socket directory: %w", err)
			}
		}
	}
	args := []string{"-D", pgdata,
		"-c", "listen_addresses=",
		// Quoted: the setting is a comma-separated list.
		"-c", `unix_socket_directories="` + strings.ReplaceAll(s.socket(), `"`, `""`) + `"`,
		"-c", "unix_socket_permissions=0700",
		"-c", "port=" + strconv.Itoa(port),
		"-c", "logging_collector=off",
	}
	if cfg.Ephemeral {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	s.cmd = exec.Command(filepath.Join(s.bin.Dir, "postgres"), args...)
	s.cmd.Dir = s.dir
	s.cmd.Env = serverEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.logOut, s.logOut
	s.cmd.SysProcAttr = procAttr(runAs)
	s.log.Info("starting PostgreSQL", "version", s.bin.Version, "bin", s.bin.Dir, "log", filepath.Join(s.dir, logFile))
	started := make(chan error, 1)
	go func() {
		// The parent-death signal follows the thread that started the
		// server: this goroutine keeps its thread until the server exits.
		runtime.LockOSThread()
		if err := s.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		s.cmd = nil
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the connection string of the server, in libpq's keyword/value
// form, in which a socket directory with spaces is simply quoted.
func (s *Server) URL() string {
	quote := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return fmt.Sprintf("host='%s' port=%d user=%s dbname=postgres sslmode=disable", quote.Replace(s.socket()), port, dbUser)
}

// Dir is the data directory (the temporary one when ephemeral).
func (s *Server) Dir() string { return s.dir }

// Version is the server's version, e.g. "15.4".
func (s *Server) Version() string { return s.bin.Version }

// Exited is closed when the server process has exited, whether by Stop
// or not.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// ExitErr says how the server exited, once Exited is closed.
func (s *Server) ExitErr() error {
	select {
	case <-s.exited:
	default:
		return nil
	}
	if s.waitErr != nil {
		return fmt.Errorf("postgres: %w (log: %s)", s.waitErr, filepath.Join(s.dir, logFile))
	}
	return fmt.Errorf("postgres exited (log: %s)", filepath.Join(s.dir, logFile))
}

// Stop shuts the server down (a fast shutdown: sessions end, a checkpoint
// is written) and releases the directory; an ephemeral one is removed.
func (s *Server) Stop() error {
	err := s.stopProcess()
	s.cleanup()
	return err
}

func (s *Server) socket() string {
	if s.sockDir != "" {
		return s.sockDir
	}
	return s.dir
}

func (s *Server) stopProcess() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
		s.log.Info("PostgreSQL stopped")
		return nil
	case <-time.After(stopTimeout):
	}
	// An immediate shutdown: the next start recovers from the WAL.
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.exited:
		return errors.New("postgres: no fast shutdown within a minute; stopped at once")
	case <-time.After(quitTimeout):
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	return errors.New("postgres: killed")
}

// cleanup releases what Start took, after the server is gone.
func (s *Server) cleanup() {
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	if s.logOut != nil {
		s.logOut.Close()
	}
	if s.sockDir != "" {
		os.RemoveAll(s.sockDir)
	}
	if s.eph && s.dir != "" {
		os.RemoveAll(s.dir)
	}
	if s.lock != nil {
		s.lock.Close()
	}
}

// initdb creates the cluster.
func (s *Server) initdb(ctx context.Context, runAs *account) error {
	tmp := filepath.Join(s.dir, initDir)
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	s.log.Info("creating a PostgreSQL cluster", "dir", filepath.Join(s.dir, clusterDir), "version", s.bin.Version)
	args := []string{"-D", tmp, "-U", dbUser, "--auth=trust", "--encoding=UTF8", "--locale=C"}
	if s.eph {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin.Dir, "initdb"), args...)
	cmd.Dir = s.dir
	cmd.Env = serverEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = procAttr(runAs)
	if err := cmd.Run(); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("initdb: %w: %s", err, lastLines(out.String(), 5))
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, clusterDir)); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	return nil
}

// clearStale deals with the server of an earlier pgtables on pgdata: it
// must be gone before this one starts. The directory's lock is held, so
// any server still running on it is nobody's.
func (s *Server) clearStale(pgdata string) error {
	pidFile := filepath.Join(pgdata, "postmaster.pid")
	pid := pidFileOwner(pgdata)
	if pid <= 0 {
		return nil
	}
	if !alive(pid) {
		s.log.Info("PostgreSQL did not stop cleanly last time; it recovers now", "pid", pid)
		return nil
	}
	if !postgresOn(pid, pgdata) {
		// The PID was reused by another process; PostgreSQL would take
		// it for a live server and refuse to start.
		s.log.Warn("removing a stale postmaster.pid naming another process", "pid", pid)
		if err := os.Remove(pidFile); err != nil {
			return fmt.Errorf("stale postmaster.pid: %w", err)
		}
		return nil
	}
	s.log.Warn("stopping the PostgreSQL an earlier pgtables left running on this directory", "pid", pid)
	for _, step := range []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, stopTimeout}, {syscall.SIGQUIT, quitTimeout}} {
		if err := signalPID(pid, step.sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop the earlier PostgreSQL (pid %d): %w", pid, err)
		}
		for deadline := time.Now().Add(step.wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if !alive(pid) {
				return nil
			}
		}
	}
	return fmt.Errorf("the earlier PostgreSQL (pid %d) on %s does not stop", pid, pgdata)
}

// waitReady waits until the server accepts a connection, it exits, or
// ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgconn.Connect(cctx, s.URL())
		cancel()
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		last = err
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited at start: %s", lastLines(s.logTail(), 5))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %s: %w", readyTimeout, last)
		}
	}
}

// ServerPID is the PID of the PostgreSQL server running on the data
// directory dir, if one is.
func ServerPID(dir string) (pid int, ok bool) {
	pgdata := filepath.Join(dir, clusterDir)
	pid = pidFileOwner(pgdata)
	if pid <= 0 || !alive(pid) || !postgresOn(pid, pgdata) {
		return 0, false
	}
	return pid, true
}

// Running reports whether process pid exists and has not exited (a zombie
// has).
func Running(pid int) bool { return alive(pid) }

// pidFileOwner is the PID in the cluster's postmaster.pid; 0 when none.
func pidFileOwner(pgdata string) int {
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// logTail is the end of the server's log.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, logFile))
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// lastLines is the last n non-empty lines of s, joined with " | " so
// that an error stays one line.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// sweepEphemeral removes the directories of ephemeral clusters in tmp
// (os.TempDir() when empty) that no pgtables holds and no server runs on:
// their pgtables was killed before it could remove them. What cannot be
// removed is left.
func sweepEphemeral(tmp string, log *slog.Logger) {
	if tmp == "" {
		tmp = os.TempDir()
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, ephemeralPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < abandonedAge {
			continue
		}
		lock, err := lockDir(dir)
		if err != nil {
			continue // held by a running pgtables, or not ours to open
		}
		if _, running := ServerPID(dir); !running {
			if err := os.RemoveAll(dir); err == nil {
				log.Info("removed the directory of an abandoned ephemeral cluster", "dir", dir)
			}
		}
		lock.Close()
	}
}

// checkContents refuses a directory that is neither empty nor a data
// directory of pgtables, so that a mistyped path never gets a cluster.
func checkContents(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	ours := false
	var other []string
	for _, e := range entries {
		switch name := e.Name(); {
		case name == clusterDir:
			ours = true
		case name == lockFile || name == logFile || name == initDir || strings.HasPrefix(name, ".s.PGSQL."):
		case name == "lost+found": // the root of a freshly made file system: a volume
		default:
			other = append(other, name)
		}
	}
	if !ours && len(other) > 0 {
		return fmt.Errorf("data directory %s is not empty and holds no pgtables cluster (%s, ...): choose an empty or new directory", dir, other[0])
	}
	return nil
}

// serverEnv is the environment of initdb and postgres: the process's
// without libpq's variables, which must not point the server elsewhere.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return append(env, "LC_ALL=C")
}

// serverUser is the credential to run initdb and postgres with: nil when
// not root. As root: the cluster's owner if it is not root, else the user
// postgres, else nobody.
func serverUser(pgdata string) (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if uid, gid, ok := owner(pgdata); ok && uid != 0 {
		return &account{uid: uid, gid: gid}, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil && uid != 0 {
			return &account{uid: uint32(uid), gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("running as root, and PostgreSQL refuses root: found no user postgres or nobody to run it as; run pgtables as a normal user")
}

// reachable checks that the user of cred can reach dir: every directory
// above it must let that user through. Supplementary groups and ACLs are
// not considered.
func reachable(dir string, cred *account) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		uid, gid, mode, ok := statOwner(p)
		if ok {
			var bit os.FileMode = 0o001
			switch {
			case uid == cred.uid:
				bit = 0o100
			case gid == cred.gid:
				bit = 0o010
			}
			if mode&bit == 0 {
				name := strconv.Itoa(int(cred.uid))
				if u, err := user.LookupId(name); err == nil {
					name = u.Username
				}
				return fmt.Errorf("running as root, so PostgreSQL runs as user %s, which cannot reach %s (%s is mode %#o): choose a data directory it can reach, or run pgtables as a normal user", name, dir, p, mode.Perm())
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
