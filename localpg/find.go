package localpg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrNotFound is returned by Find when no PostgreSQL server binaries are
// found anywhere it looks.
var ErrNotFound = errors.New("no PostgreSQL server binaries (initdb, postgres) found")

// Binaries is one PostgreSQL installation's server programs.
type Binaries struct {
	Dir     string // holds initdb and postgres
	Major   int    // 15 for 15.4
	Version string // as `postgres --version` prints it, e.g. "15.4"
}

// Finder finds the PostgreSQL server binaries.
type Finder struct {
	// BinDir, when set, is the only directory looked at.
	BinDir string
	// Path is the PATH searched for pg_config and initdb.
	Path string
	// Patterns are glob patterns of the directories tried after PATH, in
	// order; among the matches of one pattern the highest version wins.
	Patterns []string
}

// DefaultPatterns are the usual places of PostgreSQL's server binaries:
// Debian and Ubuntu, Homebrew on Apple silicon and Intel, the PGDG RPMs,
// a source build's default prefix, and Postgres.app.
func DefaultPatterns() []string {
	return []string{
		"/usr/lib/postgresql/*/bin",
		"/opt/homebrew/opt/postgresql@*/bin",
		"/opt/homebrew/opt/postgresql/bin",
		"/usr/local/opt/postgresql@*/bin",
		"/usr/local/opt/postgresql/bin",
		"/usr/pgsql-*/bin",
		"/usr/local/pgsql/bin",
		"/Applications/Postgres.app/Contents/Versions/*/bin",
	}
}

// Find returns the first installation found, in this order: BinDir alone
// when set; else `pg_config --bindir`, the directory of initdb on Path, and
// the Patterns. When want is not 0 (the major version that made an
// existing cluster), an installation of that major version is preferred
// over the order, since PostgreSQL cannot open another major version's
// cluster.
func (f Finder) Find(ctx context.Context, want int) (Binaries, error) {
	var dirs []string
	if f.BinDir != "" {
		dirs = []string{f.BinDir}
	} else {
		if pgConfig := lookPath("pg_config", f.Path); pgConfig != "" {
			if out, err := exec.CommandContext(ctx, pgConfig, "--bindir").Output(); err == nil {
				dirs = append(dirs, strings.TrimSpace(string(out)))
			}
		}
		if initdb := lookPath("initdb", f.Path); initdb != "" {
			if real, err := filepath.EvalSymlinks(initdb); err == nil {
				initdb = real
			}
			dirs = append(dirs, filepath.Dir(initdb))
		}
		for _, p := range f.Patterns {
			dirs = append(dirs, byVersionDesc(p)...)
		}
	}
	var found []Binaries
	seen := map[string]bool{}
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		if !executable(filepath.Join(d, "initdb")) || !executable(filepath.Join(d, "postgres")) {
			continue
		}
		b, err := version(ctx, d)
		if err != nil {
			continue
		}
		if want == 0 || b.Major == want {
			return b, nil
		}
		found = append(found, b)
	}
	if len(found) > 0 {
		var names []string
		for _, b := range found {
			names = append(names, fmt.Sprintf("%s (%s)", b.Version, b.Dir))
		}
		return Binaries{}, fmt.Errorf("the cluster needs PostgreSQL %d, found only %s", want, strings.Join(names, ", "))
	}
	if f.BinDir != "" {
		return Binaries{}, fmt.Errorf("%w in %s", ErrNotFound, f.BinDir)
	}
	return Binaries{}, ErrNotFound
}

// lookPath is exec.LookPath on the given PATH rather than the process's.
func lookPath(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, name); executable(p) {
			return p
		}
	}
	return ""
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

var firstNumber = regexp.MustCompile(`\d+`)

// byVersionDesc is the matches of a glob pattern, highest version first
// (postgresql@16 before postgresql@9.6, which a text sort would reverse).
func byVersionDesc(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	// The version is the first number in the part the wildcard matched.
	literal := pattern
	if i := strings.IndexAny(pattern, "*?["); i >= 0 {
		literal = pattern[:i]
	}
	num := func(s string) int {
		n, _ := strconv.Atoi(firstNumber.FindString(strings.TrimPrefix(s, literal)))
		return n
	}
	sort.SliceStable(m, func(i, j int) bool { return num(m[i]) > num(m[j]) })
	return m
}

var versionLine = regexp.MustCompile(`\(PostgreSQL\) ((\d+)[.\d]*)`)

// version asks dir's postgres for its version.
func version(ctx context.Context, dir string) (Binaries, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("postgres --version: %w", err)
	}
	m := versionLine.FindStringSubmatch(string(out))
	if m == nil {
		return Binaries{}, fmt.Errorf("postgres --version: unexpected %q", out)
	}
	major, _ := strconv.Atoi(m[2])
	return Binaries{Dir: dir, Major: major, Version: m[1]}, nil
}

// InstallHint says how to install the PostgreSQL server on this system:
// goos is runtime.GOOS and osRelease the content of /etc/os-release (nil
// when there is none).
func InstallHint(goos string, osRelease []byte) string {
	switch goos {
	case "darwin":
		return "brew install postgresql@16"
	case "linux":
	default:
		return "install the PostgreSQL server with your system's package manager"
	}
	ids := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(osRelease))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && (k == "ID" || k == "ID_LIKE") {
			for _, id := range strings.Fields(strings.Trim(v, `"'`)) {
				ids[id] = true
			}
		}
	}
	switch {
	case ids["debian"] || ids["ubuntu"]:
		return "sudo apt-get install postgresql"
	case ids["fedora"] || ids["rhel"] || ids["centos"]:
		return "sudo dnf install postgresql-server"
	case ids["alpine"]:
		return "sudo apk add postgresql"
	case ids["arch"]:
		return "sudo pacman -S postgresql"
	case ids["suse"] || ids["opensuse"]:
		return "sudo zypper install postgresql-server"
	}
	return "install the PostgreSQL server with your distribution's package manager"
}
