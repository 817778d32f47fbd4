package localpg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeInstall makes dir a fake PostgreSQL installation of version v.
func fakeInstall(t *testing.T, dir, v string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{
		"postgres": "#!/bin/sh\necho 'postgres (PostgreSQL) " + v + "'\n",
		"initdb":   "#!/bin/sh\nexit 1\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFind(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	v15 := fakeInstall(t, filepath.Join(root, "lib/postgresql/15/bin"), "15.4")
	v9 := fakeInstall(t, filepath.Join(root, "lib/postgresql/9/bin"), "9.6.24")
	v16 := fakeInstall(t, filepath.Join(root, "lib/postgresql/16/bin"), "16.2 (Debian 16.2-1)")
	brew := fakeInstall(t, filepath.Join(root, "brew/postgresql@17/bin"), "17.0")
	pgConfigDir := filepath.Join(root, "pgconfig")
	if err := os.MkdirAll(pgConfigDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pgConfigDir, "pg_config"), []byte("#!/bin/sh\necho "+v15+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// initdb on PATH through a symbolic link, as /usr/local/bin/initdb
	linkDir := filepath.Join(root, "links")
	if err := os.MkdirAll(linkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(v16, "initdb"), filepath.Join(linkDir, "initdb")); err != nil {
		t.Fatal(err)
	}
	libPattern := filepath.Join(root, "lib/postgresql/*/bin")
	brewPattern := filepath.Join(root, "brew/postgresql@*/bin")
	empty := filepath.Join(root, "empty")

	for _, tc := range []struct {
		name    string
		f       Finder
		want    int
		wantDir string
		wantErr string
	}{
		{"pg_config first", Finder{Path: pgConfigDir + ":" + linkDir, Patterns: []string{brewPattern}}, 0, v15, ""},
		{"initdb on PATH, through its link", Finder{Path: empty + ":" + linkDir, Patterns: []string{brewPattern}}, 0, v16, ""},
		{"patterns in order", Finder{Path: empty, Patterns: []string{brewPattern, libPattern}}, 0, brew, ""},
		{"highest version of a pattern, numerically", Finder{Path: empty, Patterns: []string{libPattern}}, 0, v16, ""},
		{"the cluster's version wins over the order", Finder{Path: pgConfigDir, Patterns: []string{libPattern}}, 9, v9, ""},
		{"bin dir alone", Finder{BinDir: v9, Path: pgConfigDir}, 0, v9, ""},
		{"bin dir without binaries", Finder{BinDir: empty, Path: pgConfigDir}, 0, "", "no PostgreSQL server binaries"},
		{"nothing anywhere", Finder{Path: "", Patterns: []string{filepath.Join(empty, "*")}}, 0, "", "no PostgreSQL server binaries"},
		{"no installation of the cluster's version", Finder{Path: empty, Patterns: []string{brewPattern}}, 14, "", "needs PostgreSQL 14, found only 17.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := tc.f.Find(context.Background(), tc.want)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Find = %+v, %v; want an error with %q", b, err, tc.wantErr)
				}
				if strings.Contains(tc.wantErr, "no PostgreSQL") && !errors.Is(err, ErrNotFound) {
					t.Errorf("%v is not ErrNotFound", err)
				}
				return
			}
			if err != nil || b.Dir != tc.wantDir {
				t.Fatalf("Find = %+v, %v; want %s", b, err, tc.wantDir)
			}
		})
	}
	b, err := Finder{BinDir: v16}.Find(context.Background(), 0)
	if err != nil || b.Major != 16 || b.Version != "16.2" {
		t.Errorf("version of %s: %+v %v", v16, b, err)
	}
}

func TestInstallHint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		goos, osRelease, want string
	}{
		{"linux", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n", "apt-get install postgresql"},
		{"linux", "ID=linuxmint\nID_LIKE=\"ubuntu debian\"\n", "apt-get install postgresql"},
		{"linux", "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n", "dnf install postgresql-server"},
		{"linux", "ID=alpine\n", "apk add postgresql"},
		{"linux", "", "package manager"},
		{"darwin", "", "brew install postgresql@16"},
		{"freebsd", "", "package manager"},
	} {
		if got := InstallHint(tc.goos, []byte(tc.osRelease)); !strings.Contains(got, tc.want) {
			t.Errorf("InstallHint(%s, %q) = %q, want %q in it", tc.goos, tc.osRelease, got, tc.want)
		}
	}
}
