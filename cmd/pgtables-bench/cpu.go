package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on every Linux the tool runs on).
const clockTick = 10 * time.Millisecond

// cpuGroup is a set of processes whose CPU is counted together: the
// pgtables process, or one PostgreSQL server (its postmaster and every
// child, those that come and go included).
type cpuGroup struct {
	name string
	pid  int
	// tree counts the children of pid: a postmaster's backends. Children
	// that exit between two readings are counted by the postmaster's
	// cutime and cstime, which the kernel adds them to when it reaps them.
	tree bool
}

// cpuWatch reads the CPU time of the server-side processes around each
// timed phase.
type cpuWatch struct{ groups []cpuGroup }

// cpuSample is the CPU time of every group at one moment.
type cpuSample []time.Duration

func (w *cpuWatch) sample() cpuSample {
	if w == nil {
		return nil
	}
	var children map[int][]int
	out := make(cpuSample, len(w.groups))
	for i, g := range w.groups {
		own, reaped := procCPU(g.pid)
		out[i] = own
		if !g.tree {
			continue
		}
		// A child reaped between the reading of its parent's reaped time
		// and its own is in neither: the whole CPU of a backend that
		// exits then, a preload's say, would be missing from one reading
		// (a point-read phase once showed PostgreSQL at 4.5 µs a read
		// against 25-39 in every other run). So the tree is read again
		// until the parent's reaped time stayed the same across it.
		for attempt := 0; ; attempt++ {
			if children == nil || attempt > 0 {
				children = procChildren()
			}
			sum := reaped
			for _, c := range children[g.pid] {
				t, _ := procCPU(c)
				sum += t
			}
			var again time.Duration
			own, again = procCPU(g.pid)
			if again == reaped || attempt == 9 {
				out[i] = own + sum
				break
			}
			reaped = again
		}
	}
	return out
}

// procCPU returns a process's own CPU time (all its threads) and that of
// its children it has waited for.
func procCPU(pid int) (own, reaped time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, 0
	}
	tick := func(i int) time.Duration { v, _ := strconv.ParseInt(f[i], 10, 64); return time.Duration(v) * clockTick }
	// After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
	return tick(11) + tick(12), tick(13) + tick(14)
}

// procChildren maps each process to its children.
func procChildren() map[int][]int {
	m := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := procParent(pid); pp > 0 {
			m[pp] = append(m[pp], pid)
		}
	}
	return m
}

func procParent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}

// newCPUWatch finds the processes to watch: the pgtables server (by PID,
// or as the process listening on the endpoint's port), and the
// PostgreSQL servers behind dbURL: its postmaster, found as the parent of
// a backend, and on Citus those of every node in pg_dist_node. dbPIDs,
// when set, names the postmasters instead (name=pid, comma-separated).
func newCPUWatch(ctx context.Context, serverPID int, endpoint, dbURL, dbPIDs string) (*cpuWatch, error) {
	w := &cpuWatch{}
	if serverPID == 0 && endpoint != "" {
		serverPID = listenerPID(endpoint)
	}
	if serverPID > 0 {
		w.groups = append(w.groups, cpuGroup{name: "pgtables", pid: serverPID})
	}
	switch {
	case dbPIDs != "":
		for _, kv := range strings.Split(dbPIDs, ",") {
			name, v, ok := strings.Cut(kv, "=")
			if !ok {
				name, v = "postgres-"+kv, kv
			}
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("-db-pids: %q", kv)
			}
			w.groups = append(w.groups, cpuGroup{name: strings.TrimSpace(name), pid: pid, tree: true})
		}
	case dbURL != "":
		gs, err := postgresGroups(ctx, dbURL)
		if err != nil {
			return nil, err
		}
		w.groups = append(w.groups, gs...)
	}
	if len(w.groups) == 0 {
		return nil, nil
	}
	return w, nil
}

// postgresGroups finds the postmaster behind url and, when it is a Citus
// coordinator, those of its nodes.
func postgresGroups(ctx context.Context, dbURL string) ([]cpuGroup, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("find database processes: %w", err)
	}
	defer conn.Close(ctx)
	var citus bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&citus); err != nil {
		return nil, fmt.Errorf("find database processes: %w", err)
	}
	if !citus {
		pm, err := postmaster(ctx, conn)
		if err != nil {
			return nil, err
		}
		return []cpuGroup{{name: "postgres", pid: pm, tree: true}}, nil
	}
	rows, err := conn.Query(ctx, `SELECT groupid, nodename, nodeport FROM pg_dist_node WHERE isactive AND noderole = 'primary' ORDER BY groupid, nodeport`)
	if err != nil {
		return nil, fmt.Errorf("find citus nodes: %w", err)
	}
	type node struct {
		Group int
		Host  string
		Port  int
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[node])
	if err != nil {
		return nil, fmt.Errorf("find citus nodes: %w", err)
	}
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	var gs []cpuGroup
	for _, n := range nodes {
		c := cfg.Copy()
		c.Host, c.Port, c.Fallbacks = n.Host, uint16(n.Port), nil
		nc, err := pgx.ConnectConfig(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("citus node %s:%d: %w", n.Host, n.Port, err)
		}
		pm, err := postmaster(ctx, nc)
		nc.Close(ctx)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("worker:%d", n.Port)
		if n.Group == 0 {
			name = "coordinator"
		}
		gs = append(gs, cpuGroup{name: name, pid: pm, tree: true})
	}
	return gs, nil
}

// postmaster is the parent of the connection's backend, which must run
// on this machine.
func postmaster(ctx context.Context, conn *pgx.Conn) (int, error) {
	var backend int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0, fmt.Errorf("find postmaster: %w", err)
	}
	pm := procParent(backend)
	if pm <= 1 {
		return 0, fmt.Errorf("find postmaster: backend %d is not a local process (is the database on this machine?)", backend)
	}
	return pm, nil
}

// listenerPID finds the local process listening on the endpoint's TCP
// port, through the socket inodes of /proc/net/tcp{,6} and the file
// descriptors of every process; 0 when there is none to be seen.
func listenerPID(endpoint string) int {
	u, err := url.Parse(endpoint)
	if err != nil {
		return 0
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// local_address is ADDR:PORT in hex; state 0A is LISTEN.
			if len(fs) < 10 || fs[3] != "0A" {
				continue
			}
			_, hp, _ := strings.Cut(fs[1], ":")
			if v, err := strconv.ParseInt(hp, 16, 32); err == nil && int(v) == p {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		fh.Close()
	}
	if len(inodes) == 0 {
		return 0
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if l, err := os.Readlink(fd); err == nil && inodes[l] {
				return pid
			}
		}
	}
	return 0
}

// cpuTotals accumulates each group's CPU over the timed phases of one
// scenario on one backend.
type cpuTotals struct {
	names []string
	cpu   []time.Duration
}

func (t *cpuTotals) add(w *cpuWatch, before, after cpuSample) {
	if w == nil {
		return
	}
	if t.cpu == nil {
		t.cpu = make([]time.Duration, len(w.groups))
		for _, g := range w.groups {
			t.names = append(t.names, g.name)
		}
	}
	for i := range t.cpu {
		t.cpu[i] += after[i] - before[i]
	}
}

// perUnit is each group's CPU in microseconds per unit of work (an
// operation, or an entity), and their sum under "total".
func (t *cpuTotals) perUnit(units float64) map[string]float64 {
	if t.cpu == nil || units <= 0 {
		return nil
	}
	m := map[string]float64{}
	var total time.Duration
	for i, c := range t.cpu {
		m[t.names[i]] = float64(c.Microseconds()) / units
		total += c
	}
	m["total"] = float64(total.Microseconds()) / units
	return m
}

func (w *cpuWatch) groupsOrNil() []cpuGroup {
	if w == nil {
		return nil
	}
	return w.groups
}

// describe is the groups the watch counts, for the output.
func (w *cpuWatch) describe() string {
	if w == nil {
		return ""
	}
	parts := make([]string, len(w.groups))
	for i, g := range w.groups {
		parts[i] = fmt.Sprintf("%s=%d", g.name, g.pid)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
