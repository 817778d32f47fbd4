//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package localpg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockDir takes the directory's lock, held until the file is closed; the
// kernel releases it when the process dies, however it dies.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by another pgtables", dir)
		}
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	// The holder's PID, for people looking.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// procAttr is the process attributes of initdb and postgres: a process
// group of their own, so that a Ctrl-C on the terminal reaches pgtables
// alone and pgtables stops the server in its own time; the credential to
// run as, if any; and where the system has one, a signal on the death of
// pgtables.
func procAttr(as *account) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if as != nil {
		a.Credential = &syscall.Credential{Uid: as.uid, Gid: as.gid}
	}
	setParentDeathSignal(a)
	return a
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}

// owner is the owner of path.
func owner(path string) (uid, gid uint32, ok bool) {
	uid, gid, _, ok = statOwner(path)
	return uid, gid, ok
}

func statOwner(path string) (uid, gid uint32, mode os.FileMode, ok bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0, false
	}
	return st.Uid, st.Gid, fi.Mode(), true
}

// signalPID sends sig to process pid.
func signalPID(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
