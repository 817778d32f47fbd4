//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package localpg

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// setParentDeathSignal does nothing: these systems have no parent-death
// signal, and the next start stops a server left behind.
func setParentDeathSignal(*syscall.SysProcAttr) {}

// zombie reports whether pid has exited but not been reaped.
func zombie(pid int) bool {
	out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	return err == nil && strings.HasPrefix(strings.TrimSpace(string(out)), "Z")
}

// postgresOn reports whether pid is a PostgreSQL server. Its directory is
// not checked: the cluster's own lock file named it.
func postgresOn(pid int, _ string) bool {
	out, err := exec.Command("ps", "-o", "comm=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return false
	}
	base := filepath.Base(strings.TrimSpace(string(out)))
	return base == "postgres" || base == "postmaster"
}
