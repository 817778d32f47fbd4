package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/jackc/pgx/v5"

	"github.com/pgtables/pgtables/changefeed"
	"github.com/pgtables/pgtables/internal/testdb"
	"github.com/pgtables/pgtables/internal/testlocalpg"
	"github.com/pgtables/pgtables/localpg"
	"github.com/pgtables/pgtables/tableapi"
)

// The change feed's guarantees under crashes: writers (inserts, entity
// group transactions, merges, upserts, deletes) write one table while a
// reader follows its feed with package changefeed and a file checkpoint,
// all through a load balancer in front of two pgtables replicas;
// meanwhile one replica, then both, are killed (SIGKILL) and restarted,
// PostgreSQL is
// stopped at once (immediate) and restarted, and the reader is restarted
// from its checkpoint. At the end the reader's changes are the
// acknowledged writes, each exactly once, no refused one, in each
// partition the order of acknowledgement, each transaction contiguous.
// A write whose request died may or may not have committed: it may appear
// at most once.
//
// On PostgreSQL the test runs a private cluster (local mode's, crash safe);
// on Citus (PGTABLES_TEST_BACKEND=citus) it restarts the coordinator and a
// worker of the cluster it is given, which must run on this machine.
func TestChangeFeedChaos(t *testing.T) {
	// Not parallel: on Citus restarting nodes would fail other tests'
	// requests; everywhere, a killed replica's port is free until it
	// restarts on it, and another test's freeAddr could take it meanwhile
	// (a local mode test once found a replica serving on "its" port).
	var db chaosDB
	if testdb.Citus() {
		db = newCitusChaosDB(t)
	} else {
		db = newPlainChaosDB(t)
	}
	ctx := context.Background()
	// Two replicas behind a load balancer, as in production: each
	// connection goes to either, and to the other while one is down.
	logs := &syncBuffer{}
	var replicas [2]*chaosServer
	for i := range replicas {
		replicas[i] = &chaosServer{t: t, addr: freeAddr(t), dsn: db.url(), logs: logs}
		replicas[i].start()
		t.Cleanup(replicas[i].kill)
	}
	lb := startBalancer(t, replicas[0].addr, replicas[1].addr)

	svc := serviceClient(t, "http://"+lb.addr(), nil)
	table := "chaos" + strconv.Itoa(rand.IntN(1e6))
	if _, err := svc.CreateTable(ctx, table, nil); err != nil {
		t.Fatal(err)
	}
	api, err := tableapi.NewClient("http://"+lb.addr()+"/devstoreaccount1", "devstoreaccount1", devKey)
	if err != nil {
		t.Fatal(err)
	}
	rd := &chaosReader{
		client: changefeed.NewClient(api, table),
		cp:     changefeed.FileCheckpoint{Path: filepath.Join(t.TempDir(), "cursor")},
	}
	rd.start()
	defer rd.stop()

	log := &chaosLog{}
	wctx, stopWriters := context.WithCancel(ctx)
	var writers sync.WaitGroup
	for i := range 3 {
		w := &chaosWriter{log: log, tc: svc.NewClient(table), pk: "p" + strconv.Itoa(i), rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))}
		writers.Add(1)
		go func() {
			defer writers.Done()
			w.run(wctx)
		}()
	}
	pause := func(d time.Duration) {
		time.Sleep(d)
		if err := rd.failed(); err != nil {
			t.Fatalf("reader: %v\npgtables:\n%s", err, logs)
		}
	}

	pause(2 * time.Second)
	for round, node := range db.nodes() {
		one := replicas[round%len(replicas)]
		t.Logf("%s round %d: kill pgtables %s, the other replica serves", time.Now().UTC().Format("15:04:05.000"), round, one.addr)
		one.kill()
		pause(time.Second)
		one.start()
		pause(2 * time.Second)

		t.Logf("%s round %d: stop %s at once", time.Now().UTC().Format("15:04:05.000"), round, node)
		db.crash(node)
		pause(time.Second)
		db.start(node)
		pause(2 * time.Second)

		t.Logf("%s round %d: restart the reader; kill both replicas and stop %s together", time.Now().UTC().Format("15:04:05.000"), round, node)
		rd.stop()
		for _, r := range replicas {
			r.kill()
		}
		db.crash(node)
		rd.start()
		pause(500 * time.Millisecond)
		db.start(node)
		for _, r := range replicas {
			r.start()
		}
		pause(2 * time.Second)
	}
	stopWriters()
	writers.Wait()

	// A last write, acknowledged, that the reader must reach.
	end := &chaosWriter{log: log, tc: svc.NewClient(table), pk: "end", rng: rand.New(rand.NewPCG(9, 9))}
	var marker *chaosWrite
	deadline := time.Now().Add(time.Minute)
	for marker == nil && time.Now().Before(deadline) {
		if w := end.insert(ctx); w.outcome == acked {
			marker = w
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if marker == nil {
		t.Fatalf("no write acknowledged after the chaos\npgtables:\n%s", logs)
	}
	for !rd.saw(marker.id) {
		if time.Now().After(deadline) {
			t.Fatalf("the reader did not reach the last write (%d changes read)", len(rd.all()))
		}
		pause(50 * time.Millisecond)
	}
	rd.stop()

	changes := rd.all()
	problems := checkFeed(log.writes, changes)
	var n [3]int
	for _, w := range log.writes {
		n[w.outcome]++
	}
	t.Logf("%d writes acknowledged, %d of unknown outcome, %d refused; %d changes read in %d reader runs; connections per replica %v", n[acked], n[unknown], n[refused], len(changes), rd.runs, lb.connections())
	for i, c := range lb.connections() {
		if c == 0 {
			problems = append(problems, fmt.Sprintf("replica %d took no connection: the test proves nothing of replicas", i))
		}
	}
	if n[acked] < 100 {
		problems = append(problems, fmt.Sprintf("only %d writes acknowledged: the test proves little", n[acked]))
	}
	for i, p := range problems {
		if i == 30 {
			t.Errorf("... and %d more", len(problems)-i)
			break
		}
		t.Error(p)
	}
}

// devKey is the development account's key.
const devKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// Outcomes of a write.
const (
	acked   = iota // answered 2xx: committed
	unknown        // the request died, or 5xx: may have committed
	refused        // not sent, or answered 4xx: not committed
)

// chaosWrite is one operation as a writer sent it.
type chaosWrite struct {
	id      string // the entity's W property, unique; "" for a delete
	batch   string // the entity group transaction's id, "" alone
	pk, rk  string
	op      string // the change it must show as
	seq     int    // its place among its partition's writes
	outcome int
	etag    string // answered, for a single write that returns one
}

// chaosLog collects every writer's writes.
type chaosLog struct {
	mu     sync.Mutex
	writes []*chaosWrite
}

func (l *chaosLog) add(ws ...*chaosWrite) {
	l.mu.Lock()
	l.writes = append(l.writes, ws...)
	l.mu.Unlock()
}

// chaosWriter writes one partition, one request at a time, so that the
// order of its acknowledgements is the order of its writes. An entity a
// write of unknown outcome touched is left alone afterwards: its state is
// no longer known.
type chaosWriter struct {
	log  *chaosLog
	tc   *aztables.Client
	pk   string
	rng  *rand.Rand
	live []string // entities that exist
	next int
	seq  int
}

func (w *chaosWriter) newWrite(op, rk string) *chaosWrite {
	w.seq++
	cw := &chaosWrite{pk: w.pk, rk: rk, op: op, seq: w.seq}
	if op != changefeed.OpDelete {
		cw.id = w.pk + "-" + strconv.Itoa(w.seq)
	}
	return cw
}

func (w *chaosWriter) freshKey() string {
	w.next++
	return "r" + strconv.Itoa(w.next)
}

func (w *chaosWriter) body(cw *chaosWrite) []byte {
	b, _ := json.Marshal(map[string]any{"PartitionKey": cw.pk, "RowKey": cw.rk, "W": cw.id,
		"N": strconv.Itoa(cw.seq), "N@odata.type": "Edm.Int64", "Bin": []byte{byte(cw.seq)}, "Bin@odata.type": "Edm.Binary"})
	return b
}

// take removes a random live entity.
func (w *chaosWriter) take() string {
	i := w.rng.IntN(len(w.live))
	rk := w.live[i]
	w.live = append(w.live[:i], w.live[i+1:]...)
	return rk
}

func (w *chaosWriter) run(ctx context.Context) {
	for ctx.Err() == nil {
		var ws []*chaosWrite
		switch r := w.rng.IntN(10); {
		case r < 2 || len(w.live) == 0:
			ws = []*chaosWrite{w.insert(ctx)}
		case r == 2:
			ws = []*chaosWrite{w.single(ctx, changefeed.OpInsert, w.freshKey(), true)}
		case r == 3:
			ws = []*chaosWrite{w.single(ctx, changefeed.OpReplace, w.take(), false)}
		case r == 4:
			ws = []*chaosWrite{w.single(ctx, changefeed.OpMerge, w.take(), true)}
		case r == 5:
			ws = []*chaosWrite{w.single(ctx, changefeed.OpDelete, w.take(), false)}
		default:
			ws = w.batch(ctx)
		}
		if ws[0].outcome != acked {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// insert adds a new entity.
func (w *chaosWriter) insert(ctx context.Context) *chaosWrite {
	cw := w.newWrite(changefeed.OpInsert, w.freshKey())
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := w.tc.AddEntity(rctx, w.body(cw), nil)
	cw.outcome = outcomeOf(err)
	if err == nil {
		cw.etag = string(resp.ETag)
	}
	w.settle(cw)
	w.log.add(cw)
	return cw
}

// single sends one write of op to rk: an upsert (merge mode when merge)
// for insert and replace, an update for merge, a delete.
func (w *chaosWriter) single(ctx context.Context, op, rk string, merge bool) *chaosWrite {
	cw := w.newWrite(op, rk)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var (
		etag azcore.ETag
		err  error
	)
	mode := aztables.UpdateModeReplace
	if merge {
		mode = aztables.UpdateModeMerge
	}
	switch op {
	case changefeed.OpInsert, changefeed.OpReplace:
		var r aztables.UpsertEntityResponse
		r, err = w.tc.UpsertEntity(rctx, w.body(cw), &aztables.UpsertEntityOptions{UpdateMode: mode})
		etag = r.ETag
	case changefeed.OpMerge:
		var r aztables.UpdateEntityResponse
		r, err = w.tc.UpdateEntity(rctx, w.body(cw), &aztables.UpdateEntityOptions{UpdateMode: mode})
		etag = r.ETag
	case changefeed.OpDelete:
		_, err = w.tc.DeleteEntity(rctx, w.pk, rk, nil)
	}
	cw.outcome = outcomeOf(err)
	if err == nil && op != changefeed.OpDelete {
		cw.etag = string(etag)
	}
	w.settle(cw)
	w.log.add(cw)
	return cw
}

// batch sends an entity group transaction of 2 to 5 operations on
// distinct entities.
func (w *chaosWriter) batch(ctx context.Context) []*chaosWrite {
	n := 2 + w.rng.IntN(4)
	id := w.pk + "-b" + strconv.Itoa(w.seq+1)
	var (
		ws      []*chaosWrite
		actions []aztables.TransactionAction
	)
	for range n {
		var cw *chaosWrite
		switch r := w.rng.IntN(4); {
		case r == 0 || len(w.live) == 0:
			cw = w.newWrite(changefeed.OpInsert, w.freshKey())
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: w.body(cw)})
		case r == 1:
			cw = w.newWrite(changefeed.OpMerge, w.take())
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeUpdateMerge, Entity: w.body(cw)})
		case r == 2:
			cw = w.newWrite(changefeed.OpReplace, w.take())
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: w.body(cw)})
		default:
			cw = w.newWrite(changefeed.OpDelete, w.take())
			body, _ := json.Marshal(map[string]string{"PartitionKey": cw.pk, "RowKey": cw.rk})
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: body})
		}
		cw.batch = id
		ws = append(ws, cw)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := w.tc.SubmitTransaction(rctx, actions, nil)
	for _, cw := range ws {
		cw.outcome = outcomeOf(err)
		w.settle(cw)
	}
	w.log.add(ws...)
	return ws
}

// settle updates what exists after a write: an entity it left in an
// unknown state, or deleted, is not written again; one of a refused write
// is as it was.
func (w *chaosWriter) settle(cw *chaosWrite) {
	switch {
	case cw.outcome == acked && cw.op != changefeed.OpDelete:
		w.live = append(w.live, cw.rk)
	case cw.outcome == refused && cw.op != changefeed.OpInsert:
		w.live = append(w.live, cw.rk)
	}
}

// outcomeOf classes a write's error: an answer of 4xx, or a connection
// refused, did not commit; a 5xx or a request that died may have.
func outcomeOf(err error) int {
	var re *azcore.ResponseError
	switch {
	case err == nil:
		return acked
	case errors.As(err, &re):
		if re.StatusCode >= 500 {
			return unknown
		}
		return refused
	case errors.Is(err, syscall.ECONNREFUSED):
		return refused
	}
	return unknown
}

// checkFeed compares the changes read with the writes made.
func checkFeed(writes []*chaosWrite, changes []changefeed.Change) []string {
	var problems []string
	byID := map[string]*chaosWrite{}
	deletes := map[string]*chaosWrite{} // pk/rk: an entity is deleted once at most
	batches := map[string][]*chaosWrite{}
	for _, w := range writes {
		if w.op == changefeed.OpDelete {
			deletes[w.pk+"/"+w.rk] = w
		} else {
			byID[w.id] = w
		}
		if w.batch != "" {
			batches[w.batch] = append(batches[w.batch], w)
		}
	}
	seen := map[*chaosWrite]int{} // the change's index
	lastSeq := map[string]int{}   // pk: the latest acknowledged write seen
	lastAt := map[string]int{}    // pk: its change's index
	lastAcked := map[string]int{} // pk/rk: the index of its last acknowledged change
	txnOf := map[string]string{}  // a change's txn: the batch or write it belongs to
	for i, c := range changes {
		var w *chaosWrite
		if c.Op == changefeed.OpDelete {
			w = deletes[c.PartitionKey+"/"+c.RowKey]
		} else {
			var e struct{ W string }
			if err := json.Unmarshal(c.Entity, &e); err != nil {
				problems = append(problems, fmt.Sprintf("change %d: entity %s: %v", i, c.Entity, err))
				continue
			}
			w = byID[e.W]
		}
		switch {
		case w == nil:
			problems = append(problems, fmt.Sprintf("change %d matches no write: %s", i, c.Raw))
			continue
		case w.pk != c.PartitionKey || w.rk != c.RowKey || w.op != c.Op:
			problems = append(problems, fmt.Sprintf("change %d is %s %s/%s, its write %s %s/%s", i, c.Op, c.PartitionKey, c.RowKey, w.op, w.pk, w.rk))
		case w.outcome == refused:
			problems = append(problems, fmt.Sprintf("change %d is of a refused write: %s", i, c.Raw))
		case w.etag != "" && w.etag != c.ETag:
			problems = append(problems, fmt.Sprintf("change %d: etag %s, the write answered %s", i, c.ETag, w.etag))
		}
		if j, dup := seen[w]; dup {
			problems = append(problems, fmt.Sprintf("changes %d and %d are one write: %s", j, i, c.Raw))
			continue
		}
		seen[w] = i
		// A write of unknown outcome may commit late, after writes sent
		// later: only acknowledged ones keep their partition's order, and
		// it comes after its entity's acknowledged ones (below).
		if w.outcome == acked {
			if w.seq < lastSeq[w.pk] {
				j := lastAt[w.pk]
				problems = append(problems, fmt.Sprintf("change %d (write %d of %s) after write %d of its partition (change %d):\n\t%s\n\t%s", i, w.seq, w.pk, lastSeq[w.pk], j, changes[j].Raw, c.Raw))
			} else {
				lastSeq[w.pk], lastAt[w.pk] = w.seq, i
			}
			entity := w.pk + "/" + w.rk
			lastAcked[entity] = max(lastAcked[entity], i)
		}
		unit := w.batch
		if unit == "" {
			unit = "write " + w.pk + "-" + strconv.Itoa(w.seq)
		}
		if u, ok := txnOf[c.Txn]; ok && u != unit {
			problems = append(problems, fmt.Sprintf("change %d: txn %s is shared by %s and %s", i, c.Txn, u, unit))
		}
		txnOf[c.Txn] = unit
	}
	for _, w := range writes {
		// An entity's write of unknown outcome was its last.
		if i, ok := seen[w]; ok && w.outcome == unknown && i < lastAcked[w.pk+"/"+w.rk] {
			problems = append(problems, fmt.Sprintf("change %d, of a write of unknown outcome, before change %d of an earlier write of its entity", i, lastAcked[w.pk+"/"+w.rk]))
		}
		if _, ok := seen[w]; !ok && w.outcome == acked {
			problems = append(problems, fmt.Sprintf("acknowledged write %s %s/%s (%s, batch %q) is not in the feed", w.op, w.pk, w.rk, w.id, w.batch))
		}
	}
	for id, ws := range batches {
		at, ok := seen[ws[0]]
		for k, w := range ws {
			j, in := seen[w]
			switch {
			case in != ok:
				problems = append(problems, fmt.Sprintf("batch %s: operation %d in the feed %v, operation 0 %v", id, k, in, ok))
			case in && j != at+k:
				problems = append(problems, fmt.Sprintf("batch %s: operation %d is change %d, operation 0 change %d", id, k, j, at))
			case in && changes[j].Txn != changes[at].Txn:
				problems = append(problems, fmt.Sprintf("batch %s: operations in transactions %s and %s", id, changes[at].Txn, changes[j].Txn))
			}
		}
	}
	return problems
}

// chaosReader follows the feed in the background, from its checkpoint.
type chaosReader struct {
	client *changefeed.Client
	cp     changefeed.FileCheckpoint

	mu      sync.Mutex
	changes []changefeed.Change
	ids     map[string]bool
	err     error
	runs    int
	cancel  context.CancelFunc
	done    chan struct{}
}

func (r *chaosReader) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.cancel, r.done = cancel, make(chan struct{})
	r.runs++
	done := r.done
	r.mu.Unlock()
	f := &changefeed.Follower{Client: r.client, Checkpoint: r.cp, From: changefeed.Oldest, Wait: 2 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
	go func() {
		defer close(done)
		err := f.Follow(ctx, func(_ context.Context, txn []changefeed.Change) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.ids == nil {
				r.ids = map[string]bool{}
			}
			for _, c := range txn {
				var e struct{ W string }
				_ = json.Unmarshal(c.Entity, &e)
				r.ids[e.W] = true
			}
			r.changes = append(r.changes, txn...)
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
		}
	}()
}

// stop ends the current run, its last transaction handed over and saved.
func (r *chaosReader) stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (r *chaosReader) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *chaosReader) saw(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ids[id]
}

func (r *chaosReader) all() []changefeed.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]changefeed.Change(nil), r.changes...)
}

// chaosServer is pgtables run as a process of its own (this test binary,
// TestMain), so that it can be killed.
type chaosServer struct {
	t      *testing.T
	addr   string
	dsn    string
	logs   *syncBuffer
	cmd    *exec.Cmd
	exited chan error
}

func (s *chaosServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(os.Args[0])
	s.cmd.Env = append(os.Environ(),
		"PGTABLES_TEST_RUN_MAIN=1",
		"PGTABLES_DATABASE_URL="+s.dsn,
		"PGTABLES_LISTEN="+s.addr,
		"PGTABLES_CHANGE_FEED=on", // on Citus too
		"PGTABLES_LOG_FORMAT=text",
		"PGTABLES_LOG_LEVEL=warn",
	)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.exited = make(chan error, 1)
	go func(cmd *exec.Cmd, exited chan error) { exited <- cmd.Wait() }(s.cmd, s.exited)
	deadline := time.Now().Add(time.Minute)
	for {
		if resp, err := http.Get("http://" + s.addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-s.exited:
			s.cmd = nil
			s.t.Fatalf("pgtables exited (%v) before it was ready:\n%s", err, s.logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("pgtables not ready within a minute:\n%s", s.logs)
		}
	}
}

// kill sends SIGKILL and waits for the process to end.
func (s *chaosServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// chaosDB is the database the test crashes.
type chaosDB interface {
	url() string
	nodes() []string   // what to crash, a round each
	crash(node string) // stop at once, as a power cut
	start(node string) // start again, recovering
}

// plainChaosDB is a private PostgreSQL cluster, crash safe, on a socket.
type plainChaosDB struct {
	t      *testing.T
	dir    string
	finder localpg.Finder
	srv    *localpg.Server
	first  string
}

func newPlainChaosDB(t *testing.T) *plainChaosDB {
	d := &plainChaosDB{t: t, finder: testlocalpg.Finder(t), dir: filepath.Join(testlocalpg.Dir(t), "pg")}
	d.start("")
	d.first = d.srv.URL()
	t.Cleanup(func() {
		if d.srv != nil {
			_ = d.srv.Stop()
		}
	})
	return d
}

func (d *plainChaosDB) url() string     { return d.first }
func (d *plainChaosDB) nodes() []string { return []string{"PostgreSQL", "PostgreSQL"} }

func (d *plainChaosDB) crash(string) {
	d.t.Helper()
	pid, ok := localpg.ServerPID(d.srv.Dir())
	if !ok {
		d.t.Fatal("PostgreSQL is not running")
	}
	// SIGQUIT is PostgreSQL's immediate shutdown.
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		d.t.Fatal(err)
	}
	<-d.srv.Exited()
	_ = d.srv.Stop() // releases the directory
	d.srv = nil
}

func (d *plainChaosDB) start(string) {
	d.t.Helper()
	srv, err := localpg.Start(context.Background(), localpg.Config{Dir: d.dir, Finder: d.finder})
	if err != nil {
		d.t.Fatal(err)
	}
	d.srv = srv
	if d.first != "" && srv.URL() != d.first {
		d.t.Fatalf("PostgreSQL moved from %s to %s", d.first, srv.URL())
	}
}

// citusChaosDB is a node of the Citus cluster the tests run on, restarted
// with pg_ctl on its data directory.
type citusChaosDB struct {
	t     *testing.T
	dsn   string
	dirs  map[string]string // node (host:port) -> data directory
	order []string
	bin   string
}

func newCitusChaosDB(t *testing.T) *citusChaosDB {
	d := &citusChaosDB{t: t, dsn: testdb.New(t), dirs: map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT setting FROM pg_config WHERE name = 'BINDIR'`).Scan(&d.bin); err != nil {
		t.Fatal(err)
	}
	// The coordinator, then the workers; the first two are crashed.
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' ORDER BY groupid`)
	if err != nil {
		t.Fatal(err)
	}
	var nodes [][2]string
	for rows.Next() {
		var host string
		var port int
		if err := rows.Scan(&host, &port); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, [2]string{host, strconv.Itoa(port)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n[0] != "127.0.0.1" && n[0] != "localhost" && n[0] != "::1" {
			t.Fatalf("node %s:%s is not on this machine: the test restarts nodes with pg_ctl", n[0], n[1])
		}
		node := n[0] + ":" + n[1]
		c, err := pgx.Connect(ctx, "postgres://postgres@"+node+"/postgres?sslmode=disable")
		if err != nil {
			t.Fatal(err)
		}
		var dir string
		err = c.QueryRow(ctx, `SHOW data_directory`).Scan(&dir)
		c.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d.dirs[node] = dir
		if len(d.order) < 2 {
			d.order = append(d.order, node)
		}
		durable(t, node)
	}
	return d
}

// durable makes a node commit synchronously while the test runs: a
// throwaway cluster (cluster.sh's, CI's) commits asynchronously, and an
// immediate stop would lose what it acknowledged last, table and feed
// alike, which no change feed can give back.
func durable(t *testing.T, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := "postgres://postgres@" + node + "/postgres?sslmode=disable"
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var sync string
	if err := c.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if sync == "on" {
		return
	}
	for _, q := range []string{`ALTER SYSTEM SET synchronous_commit = on`, `SELECT pg_reload_conf()`} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("synchronous_commit of %s left on: %v", node, err)
			return
		}
		defer c.Close(ctx)
		for _, q := range []string{`ALTER SYSTEM RESET synchronous_commit`, `SELECT pg_reload_conf()`} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Errorf("synchronous_commit of %s left on: %v", node, err)
			}
		}
	})
}

func (d *citusChaosDB) url() string     { return d.dsn }
func (d *citusChaosDB) nodes() []string { return d.order }

func (d *citusChaosDB) crash(node string) { d.pgctl("stop", "-m", "immediate", "-D", d.dirs[node]) }

func (d *citusChaosDB) start(node string) {
	dir := d.dirs[node]
	// cluster.sh keeps a node's log beside its directory.
	logFile := dir + ".log"
	if _, err := os.Stat(logFile); err != nil {
		logFile = filepath.Join(dir, "pgtables-chaos.log")
	}
	d.pgctl("start", "-D", dir, "-l", logFile, "-t", "90")
}

// pgctl runs pg_ctl -w as the owner of the data directories.
func (d *citusChaosDB) pgctl(args ...string) {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(d.bin, "pg_ctl"), append(args, "-w")...)
	cmd.Dir = "/"
	if fi, err := os.Stat(d.dirs[d.order[0]]); err == nil && os.Geteuid() == 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid}}
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		d.t.Fatalf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
