package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/pgtables/pgtables/internal/testlocalpg"
	"github.com/pgtables/pgtables/localpg"
)

// localProc is pgtables run as its own process, with an environment of
// its own.
type localProc struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan error
}

// startProc runs this test binary as pgtables with only env as its
// environment (no PGTABLES_DATABASE_URL, no PG* variables unless given),
// and kills it when the test ends if it still runs.
func startProc(t *testing.T, env ...string) *localProc {
	t.Helper()
	p := &localProc{cmd: exec.Command(os.Args[0]), logs: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = append([]string{"PGTABLES_TEST_RUN_MAIN=1"}, env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-p.exited:
			p.exited <- err
		default:
			_ = p.cmd.Process.Kill()
			p.exited <- <-p.exited
		}
	})
	return p
}

// wait is the process's exit, within a minute.
func (p *localProc) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(time.Minute):
		t.Fatalf("pgtables did not exit\n%s", p.logs)
		return nil
	}
}

// waitReady waits until base answers /-/ready with 200; creating a
// cluster takes seconds on a busy machine.
func (p *localProc) waitReady(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for get(base+"/-/ready") != http.StatusOK {
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("pgtables exited (%v) before it was ready:\n%s", err, p.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never ready:\n%s", base, p.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// terminate sends SIGTERM: pgtables must exit 0, and its PostgreSQL
// (pid) be gone.
func (p *localProc) terminate(t *testing.T, pid int) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs)
	}
	if localpg.Running(pid) {
		t.Errorf("PostgreSQL (pid %d) still running after pgtables exited", pid)
	}
}

// stopServerOf ends, when the test ends, a PostgreSQL still running on
// the data directory, so that no test leaves one behind.
func stopServerOf(t *testing.T, data string) {
	t.Cleanup(func() {
		pid, ok := localpg.ServerPID(data)
		if !ok {
			return
		}
		t.Errorf("PostgreSQL (pid %d) still running on %s", pid, data)
		_ = syscall.Kill(pid, syscall.SIGQUIT)
		for i := 0; i < 200 && localpg.Running(pid); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	})
}

type localEntity struct {
	PartitionKey string
	RowKey       string
	N            int
}

func entityJSON(t *testing.T, e localEntity) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll is the entities of the table matching filter, keyed by RowKey.
func readAll(t *testing.T, client *aztables.Client, filter string) map[string]int {
	t.Helper()
	got := map[string]int{}
	pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatalf("query %q: %v", filter, err)
		}
		for _, raw := range page.Entities {
			var e localEntity
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			got[e.RowKey] = e.N
		}
	}
	return got
}

// With nothing configured, not even libpq's variables, pgtables runs a
// PostgreSQL of its own in its data directory, beside the machine's own
// server: the SDK works against it; the data outlives a SIGTERM and a
// SIGKILL of pgtables; the server of a killed pgtables is dealt with, so
// that one PostgreSQL at most runs on the directory; a SIGTERM leaves
// none running; and pgtables exits 1 when its PostgreSQL dies under it.
func TestLocalModeRestartAndKill(t *testing.T) {
	t.Parallel()
	testlocalpg.Finder(t)
	ctx := context.Background()
	dir := testlocalpg.Dir(t)
	data := filepath.Join(dir, "local data, here") // a socket path to quote
	stopServerOf(t, data)
	addr := freeAddr(t)
	base := "http://" + addr
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "PGTABLES_LISTEN=" + addr, "PGTABLES_DATA_DIR=" + data}
	client := serviceClient(t, base, nil).NewClient("localmode")

	first := startProc(t, env...)
	first.waitReady(t, base)
	// Not a terminal: JSON lines, the first one naming the data directory,
	// then the endpoint and the connection string to paste.
	lines := strings.Split(first.logs.String(), "\n")
	var head struct {
		Msg     string `json:"msg"`
		DataDir string `json:"data_dir"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &head); err != nil || head.DataDir != data {
		t.Errorf("first log line %q (%v): want JSON naming the data directory %s", lines[0], err, data)
	}
	for _, want := range []string{
		`"url":"` + base + `/devstoreaccount1"`,
		`"value":"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=`,
		`"url":"` + base + `/-/console/"`,
	} {
		if !strings.Contains(first.logs.String(), want) {
			t.Errorf("no %s in the log:\n%s", want, first.logs)
		}
	}

	if _, err := client.CreateTable(ctx, nil); err != nil {
		t.Fatalf("create table: %v", err)
	}
	want := map[string]int{}
	for i := range 3 {
		e := localEntity{"p", fmt.Sprintf("single%d", i), i}
		if _, err := client.UpsertEntity(ctx, entityJSON(t, e), nil); err != nil {
			t.Fatalf("upsert: %v", err)
		}
		want[e.RowKey] = e.N
	}
	var batch []aztables.TransactionAction
	for i := range 5 {
		e := localEntity{"p", fmt.Sprintf("batch%d", i), 10 + i}
		batch = append(batch, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: entityJSON(t, e)})
		want[e.RowKey] = e.N
	}
	if _, err := client.SubmitTransaction(ctx, batch, nil); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if got := readAll(t, client, "PartitionKey eq 'p' and N ge 10"); len(got) != 5 || got["batch4"] != 14 {
		t.Errorf("query N ge 10: %v, want the batch's five", got)
	}
	firstPID, ok := localpg.ServerPID(data)
	if !ok {
		t.Fatalf("no PostgreSQL on %s while serving", data)
	}

	first.terminate(t, firstPID)

	// A restart reads the data back.
	second := startProc(t, env...)
	second.waitReady(t, base)
	if got := readAll(t, client, "PartitionKey eq 'p'"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a restart: %v, want %v", got, want)
	}
	e := localEntity{"p", "beforekill", 99}
	if _, err := client.UpsertEntity(ctx, entityJSON(t, e), nil); err != nil {
		t.Fatalf("upsert: %v", err)
	}
	want[e.RowKey] = e.N
	secondPID, ok := localpg.ServerPID(data)
	if !ok {
		t.Fatalf("no PostgreSQL on %s while serving", data)
	}

	// SIGKILL, and start again at once: the acknowledged write is there,
	// and the earlier PostgreSQL is gone.
	if err := second.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = second.wait(t)
	third := startProc(t, env...)
	third.waitReady(t, base)
	if got := readAll(t, client, "PartitionKey eq 'p'"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a kill: %v, want %v", got, want)
	}
	thirdPID, ok := localpg.ServerPID(data)
	if !ok || thirdPID == secondPID {
		t.Errorf("PostgreSQL after the kill: pid %d (%v), before: %d", thirdPID, ok, secondPID)
	}
	if localpg.Running(secondPID) {
		t.Errorf("the killed pgtables' PostgreSQL (pid %d) still runs beside the new one (pid %d)", secondPID, thirdPID)
	}
	third.terminate(t, thirdPID)

	// Its PostgreSQL gone from under it, pgtables stops with an error.
	fourth := startProc(t, env...)
	fourth.waitReady(t, base)
	fourthPID, ok := localpg.ServerPID(data)
	if !ok {
		t.Fatalf("no PostgreSQL on %s while serving", data)
	}
	if err := syscall.Kill(fourthPID, syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := fourth.wait(t); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit after PostgreSQL's: %v, want status 1\n%s", err, fourth.logs)
	}
	if !strings.Contains(fourth.logs.String(), "the local PostgreSQL exited") {
		t.Errorf("no word of PostgreSQL's exit:\n%s", fourth.logs)
	}
}

// Without server binaries anywhere (PATH emptied, no usual location),
// pgtables says in one line what to install and exits non-zero at once,
// without making the data directory.
func TestLocalModeWithoutBinaries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	p := startProc(t, "PATH=", "HOME="+dir, "PGTABLES_LISTEN="+freeAddr(t), "PGTABLES_DATA_DIR="+data,
		"PGTABLES_LOCAL_PG_SEARCH="+filepath.Join(dir, "nowhere", "*"))
	err := p.wait(t)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1\n%s", err, p.logs)
	}
	out := strings.TrimSuffix(p.logs.String(), "\n")
	osRelease, _ := os.ReadFile("/etc/os-release")
	hint := localpg.InstallHint(runtime.GOOS, osRelease)
	if strings.Contains(out, "\n") || !strings.HasPrefix(out, "pgtables: ") || !strings.Contains(out, hint) || !strings.Contains(out, "PGTABLES_DATABASE_URL") {
		t.Errorf("output %q: want one line saying %q and naming PGTABLES_DATABASE_URL", out, hint)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory made without binaries: %v", err)
	}
}

// Local mode is on exactly when neither PGTABLES_DATABASE_URL nor libpq's
// variables say where a database is; the log is text on a terminal only,
// unless the format is set.
func TestLocalModeChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, true},
		{map[string]string{"PGTABLES_DATA_DIR": "elsewhere"}, true},
		{map[string]string{"PGTABLES_DATABASE_URL": "postgres://db/x"}, false},
		{map[string]string{"PGHOST": "db"}, false},
		{map[string]string{"PGPORT": "5433"}, false},
		{map[string]string{"PGSERVICE": "tables"}, false},
		{map[string]string{"PGPASSWORD": "secret"}, true},
	} {
		cfg, _, err := parseConfig("pgtables", nil, env(tc.env), os.Stderr)
		if err != nil || cfg.local != tc.want {
			t.Errorf("%v: local %v (%v), want %v", tc.env, cfg != nil && cfg.local, err, tc.want)
		}
		tc.env["PGTABLES_LOCAL_EPHEMERAL"] = "true"
		if _, _, err := parseConfig("pgtables", nil, env(tc.env), os.Stderr); (err == nil) != tc.want {
			t.Errorf("%v: ephemeral accepted: %v, want %v", tc.env, err == nil, tc.want)
		}
	}
	var pipe strings.Builder
	for _, tc := range []struct {
		format string
		want   string
	}{{"", `{"time"`}, {"text", "time="}, {"json", `{"time"`}} {
		pipe.Reset()
		log, err := newLogger(&config{logLevel: "info", logFormat: tc.format}, &pipe)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("x")
		if !strings.HasPrefix(pipe.String(), tc.want) {
			t.Errorf("format %q into a non-terminal: %q, want %s...", tc.format, pipe.String(), tc.want)
		}
	}
}
