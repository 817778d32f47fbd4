package localpg

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// setParentDeathSignal asks the kernel to send the server a fast shutdown
// when pgtables dies, SIGKILL included.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGINT }

// zombie reports whether pid has exited but not been reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// postgresOn reports whether pid is a PostgreSQL server working in
// pgdata: its program is postgres and its working directory pgdata,
// where the server changes directory at start.
func postgresOn(pid int, pgdata string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return false
	}
	prog, _, _ := strings.Cut(string(cmdline), "\x00")
	if base := filepath.Base(prog); base != "postgres" && base != "postmaster" {
		return false
	}
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil {
		// Not ours to inspect; the lock file named it, so take its word.
		return true
	}
	want, err := filepath.EvalSymlinks(pgdata)
	if err != nil {
		want = pgdata
	}
	return cwd == want
}
