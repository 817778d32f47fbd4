package ha

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Ports of the formation: the monitor and the two nodes.
const (
	monitorPort = 9790
	node1Port   = 9791
	node2Port   = 9792
)

// formation is a pg_auto_failover formation on loopback: a monitor and
// two nodes, one primary and one synchronous standby, tuned to notice a
// dead primary within seconds.
type formation struct {
	*sandbox
	monitor string         // the monitor's data directory
	groups  map[string]int // node name -> process group of its keeper and postgres
	ports   map[string]int // node name -> port
}

// monitorTuning makes the monitor check nodes every second and give up on
// an unhealthy primary after 2 s (defaults: 5 s and 20 s), and wait 3 s
// (default 30) for a primary that cannot be reached to demote itself; the
// keepers' network_partition_timeout below makes a cut-off primary demote
// itself within 2 s, before that.
var monitorTuning = map[string]string{
	"pgautofailover.health_check_period":               "1000",
	"pgautofailover.health_check_timeout":              "1000",
	"pgautofailover.health_check_max_retries":          "1",
	"pgautofailover.health_check_retry_delay":          "500",
	"pgautofailover.node_considered_unhealthy_timeout": "2000",
	"pgautofailover.primary_demote_timeout":            "3000",
	"pgautofailover.startup_grace_period":              "2000",
}

func startFormation(t *testing.T) *formation {
	t.Helper()
	for _, p := range []int{monitorPort, node1Port, node2Port} {
		freePort(t, p)
	}
	f := &formation{sandbox: newSandbox(t), groups: map[string]int{}, ports: map[string]int{}}
	for _, d := range []string{"config", "data", "run"} {
		f.mkdir(d)
	}
	pgctl := filepath.Join(pgBin, "pg_ctl")
	f.monitor = filepath.Join(f.dir, "monitor")
	f.run("pg_autoctl", "create", "monitor", "--pgdata", f.monitor, "--pgport", fmt.Sprint(monitorPort),
		"--listen", "127.0.0.1", "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", pgctl)
	f.start("monitor.log", "pg_autoctl", "run", "--pgdata", f.monitor)
	mon := f.waitMonitor()
	for k, v := range monitorTuning {
		if _, err := mon.Exec(context.Background(), fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", k, v)); err != nil {
			t.Fatalf("tune monitor: %v", err)
		}
	}
	if _, err := mon.Exec(context.Background(), "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	monURL := fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", monitorPort)
	for _, n := range []struct {
		name string
		port int
	}{{"n1", node1Port}, {"n2", node2Port}} {
		pgdata := filepath.Join(f.dir, n.name)
		// The second node's create clones the first, which must run.
		f.run("pg_autoctl", "create", "postgres", "--pgdata", pgdata, "--pgport", fmt.Sprint(n.port),
			"--listen", "127.0.0.1", "--hostname", "127.0.0.1", "--name", n.name, "--monitor", monURL,
			"--auth", "trust", "--no-ssl", "--pgctl", pgctl)
		f.run("pg_autoctl", "config", "set", "--pgdata", pgdata, "timeout.network_partition_timeout", "2")
		f.groups[n.name] = f.start(n.name+".log", "pg_autoctl", "run", "--pgdata", pgdata)
		f.ports[n.name] = n.port
	}
	f.waitNodes(2*time.Minute, "primary", "secondary")
	return f
}

// waitMonitor waits for the monitor's database and returns a connection
// to it, closed at the test's end.
func (f *formation) waitMonitor() *pgx.Conn {
	f.t.Helper()
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pg_auto_failover?sslmode=disable&connect_timeout=2", monitorPort)
	deadline := time.Now().Add(time.Minute)
	for {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			f.t.Cleanup(func() { conn.Close(context.Background()) })
			return conn
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("monitor did not start: %v\n%s", err, f.tail("monitor.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// node is a node's state as the monitor has it.
type node struct {
	name           string
	reported, goal string
}

// nodes returns the nodes' states from the monitor.
func (f *formation) nodes(ctx context.Context) ([]node, error) {
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pg_auto_failover?sslmode=disable&connect_timeout=2", monitorPort)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nodename, reportedstate::text, goalstate::text
		FROM pgautofailover.node ORDER BY nodename`)
	if err != nil {
		return nil, err
	}
	var ns []node
	for rows.Next() {
		var n node
		if err := rows.Scan(&n.name, &n.reported, &n.goal); err != nil {
			return nil, err
		}
		ns = append(ns, n)
	}
	return ns, rows.Err()
}

// primary returns the name of the node that is primary, reported and
// assigned, or "".
func (f *formation) primary(ctx context.Context) string {
	ns, err := f.nodes(ctx)
	if err != nil {
		return ""
	}
	for _, n := range ns {
		if (n.reported == "primary" || n.reported == "wait_primary") && n.reported == n.goal {
			return n.name
		}
	}
	return ""
}

// waitNodes waits until the nodes' reported and assigned states are the
// given ones, in any order.
func (f *formation) waitNodes(limit time.Duration, states ...string) {
	f.t.Helper()
	deadline := time.Now().Add(limit)
	var last []node
	for time.Now().Before(deadline) {
		ns, err := f.nodes(context.Background())
		if err == nil {
			last = ns
			if matches(ns, states) {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Fatalf("formation not %v within %v: %+v\nmonitor:\n%s\nn1:\n%s\nn2:\n%s", states, limit, last,
		f.tail("monitor.log"), f.tail("n1.log"), f.tail("n2.log"))
}

func matches(ns []node, states []string) bool {
	if len(ns) != len(states) {
		return false
	}
	want := map[string]int{}
	for _, s := range states {
		want[s]++
	}
	for _, n := range ns {
		if n.reported != n.goal || want[n.reported] == 0 {
			return false
		}
		want[n.reported]--
	}
	return true
}

// url is the connection URL pgtables uses: both nodes, the writable one
// chosen at each connect.
func (f *formation) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		node1Port, node2Port)
}
