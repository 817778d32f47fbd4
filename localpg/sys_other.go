//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package localpg

import (
	"errors"
	"os"
	"syscall"
)

var errUnsupported = errors.New("local mode needs Linux, macOS or a BSD; set PGTABLES_DATABASE_URL to use a PostgreSQL server")

func lockDir(string) (*os.File, error) { return nil, errUnsupported }

func procAttr(*account) *syscall.SysProcAttr { return nil }

func signalPID(int, syscall.Signal) error { return errUnsupported }

func alive(int) bool { return false }

func postgresOn(int, string) bool { return false }

func owner(string) (uid, gid uint32, ok bool) { return 0, 0, false }

func statOwner(string) (uid, gid uint32, mode os.FileMode, ok bool) { return 0, 0, 0, false }
