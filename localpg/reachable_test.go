//go:build unix

package localpg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The check run as root before handing a directory to the server's user:
// every directory above must let that user through.
func TestReachable(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for _, p := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range map[string]os.FileMode{"open": 0o755, "closed": 0o700, "group": 0o710} {
		if err := os.Mkdir(filepath.Join(base, name), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(base, name), mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	me := &account{uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	stranger := &account{uid: 54321, gid: 54321}
	inGroup := &account{uid: 54321, gid: uint32(os.Getgid())}
	for _, tc := range []struct {
		dir     string
		as      *account
		wantErr bool
	}{
		{"open", stranger, false},
		{"closed", stranger, true},
		{"closed", me, false},
		{"group", stranger, true},
		{"group", inGroup, false},
	} {
		err := reachable(filepath.Join(base, tc.dir, "data"), tc.as)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s as uid %d gid %d: %v, want error %v", tc.dir, tc.as.uid, tc.as.gid, err, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), filepath.Join(base, tc.dir)+" is mode") {
			t.Errorf("error does not name the directory in the way: %v", err)
		}
	}
}
