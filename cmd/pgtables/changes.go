package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgtables/pgtables/changefeed"
	"github.com/pgtables/pgtables/tableapi"
)

// changesCommand runs `pgtables changes`: it prints a table's changes as
// JSON lines, from a cursor or a checkpoint, until caught up or, with
// -follow, until stopped.
func changesCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgtables changes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn := fs.String("connection-string", getenv("PGTABLES_CONNECTION_STRING"), "the server's connection string (AccountName=...;AccountKey=...;TableEndpoint=..., or SharedAccessSignature=...) (env PGTABLES_CONNECTION_STRING)")
	endpoint := fs.String("endpoint", "", "instead of a connection string: the account's endpoint, such as http://127.0.0.1:10002/devstoreaccount1")
	account := fs.String("account", "", "with -endpoint: the account")
	key := fs.String("key", "", "with -endpoint: the account's key")
	table := fs.String("table", "", "the table")
	from := fs.String("from", changefeed.Now, "where to start without a checkpoint: now, oldest, or a change's cursor")
	checkpoint := fs.String("checkpoint", "", "a file that keeps the cursor: read to resume when present, replaced after each transaction")
	follow := fs.Bool("follow", false, "keep waiting for new changes; else stop when caught up")
	limit := fs.Int("limit", 0, "the most changes per request (1-1000; 0: the server's default)")
	wait := fs.Duration("wait", 20*time.Second, "with -follow: how long each request waits for a change")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *table == "" {
		return errors.New("changes: -table is needed")
	}
	var (
		api *tableapi.Client
		err error
	)
	switch {
	case *endpoint != "":
		api, err = tableapi.NewClient(*endpoint, *account, *key)
	case *conn != "":
		api, err = tableapi.Dial(*conn)
	default:
		return errors.New("changes: -connection-string, or -endpoint with -account and -key, is needed")
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	f := &changefeed.Follower{
		Client:        changefeed.NewClient(api, *table),
		From:          *from,
		Limit:         *limit,
		Wait:          *wait,
		UntilCaughtUp: !*follow,
		OnRetry: func(err error, pause time.Duration) {
			fmt.Fprintf(stderr, "pgtables changes: %v; trying again in %v\n", err, pause.Round(time.Millisecond))
		},
	}
	if *checkpoint != "" {
		f.Checkpoint = changefeed.FileCheckpoint{Path: *checkpoint}
	}
	out := bufio.NewWriter(stdout)
	err = f.Follow(ctx, func(_ context.Context, txn []changefeed.Change) error {
		for _, c := range txn {
			out.Write(c.Raw)
			out.WriteByte('\n')
		}
		// Out before the checkpoint moves past them.
		return out.Flush()
	})
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	var fe *changefeed.Error
	switch {
	case errors.Is(err, context.Canceled) && *follow:
		return nil // stopped by a signal
	case errors.Is(err, changefeed.ErrCursorExpired) && errors.As(err, &fe):
		return fmt.Errorf("%w; the oldest change retained is at -from %s", err, fe.OldestCursor)
	}
	return err
}
