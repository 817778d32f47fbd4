package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtables/pgtables/httpapi"
	"github.com/pgtables/pgtables/odata"
	"github.com/pgtables/pgtables/store"
	"github.com/pgtables/pgtables/tableapi"
)

// indexRow is an index as the command shows it, whichever way it came.
type indexRow struct {
	name, property, typ, state, detail string
	afterPK                            bool
}

// indexBackend is where the command declares indexes: the database
// directly, or a server's index API.
type indexBackend interface {
	create(ctx context.Context, table string, spec tableapi.IndexSpec) (indexRow, error)
	list(ctx context.Context, table string) ([]indexRow, error)
	drop(ctx context.Context, table, name string) error
	close()
}

// indexCommand runs `pgtables index create|list|drop`.
func indexCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("index: want create, list or drop")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("pgtables index "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("database-url", getenv("PGTABLES_DATABASE_URL"), "PostgreSQL connection string, to work on the database directly (env PGTABLES_DATABASE_URL)")
	account := fs.String("account", httpapi.DevAccount, "the account, with -database-url")
	conn := fs.String("connection-string", "", "a server's connection string (AccountName=...;AccountKey=...;TableEndpoint=...), to work through its index API instead")
	table := fs.String("table", "", "the table")
	property := fs.String("property", "", "create: the property to index")
	typ := fs.String("type", "", "create: its EDM type (Edm.String, Edm.Int32, Edm.Int64, Edm.Double, Edm.DateTime, Edm.Guid, Edm.Boolean, Edm.Binary)")
	afterPK := fs.Bool("after-partition-key", false, "create: order the index by PartitionKey first, for filters within one partition")
	wait := fs.Bool("wait", true, "create: wait until the build ends (always with -database-url, whose process runs the build)")
	name := fs.String("name", "", "drop: the index's name, as list shows it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *table == "" {
		return errors.New("index: -table is needed")
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var (
		b   indexBackend
		err error
	)
	if *conn != "" {
		b, err = dialIndexAPI(*conn)
	} else {
		b, err = openIndexDB(ctx, *dbURL, *account)
		*wait = true
	}
	if err != nil {
		return err
	}
	defer b.close()
	switch sub {
	case "create":
		if *property == "" || *typ == "" {
			return errors.New("index create: -property and -type are needed")
		}
		row, err := b.create(ctx, *table, tableapi.IndexSpec{Property: *property, Type: *typ, AfterPartitionKey: *afterPK})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "index %s on %s: building\n", row.name, *table)
		if !*wait {
			return nil
		}
		return waitBuild(ctx, b, *table, row.name, stdout)
	case "list":
		rows, err := b.list(ctx, *table)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tPROPERTY\tTYPE\tORDER\tSTATE\tDETAIL")
		for _, r := range rows {
			order := "value, PartitionKey, RowKey"
			if r.afterPK {
				order = "PartitionKey, value, RowKey"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.property, r.typ, order, r.state, r.detail)
		}
		return w.Flush()
	case "drop":
		if *name == "" {
			return errors.New("index drop: -name is needed")
		}
		if err := b.drop(ctx, *table, *name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "index %s dropped\n", *name)
		return nil
	}
	return fmt.Errorf("index: unknown command %q (want create, list or drop)", sub)
}

// waitBuild polls the index until its build ends, showing progress.
func waitBuild(ctx context.Context, b indexBackend, table, name string, stdout io.Writer) error {
	last := ""
	for {
		rows, err := b.list(ctx, table)
		if err != nil {
			return err
		}
		var row *indexRow
		for i := range rows {
			if rows[i].name == name {
				row = &rows[i]
			}
		}
		switch {
		case row == nil:
			return fmt.Errorf("index %s is gone", name)
		case row.state == store.IndexReady:
			fmt.Fprintf(stdout, "index %s on %s: ready\n", name, table)
			return nil
		case row.state == store.IndexFailed:
			return fmt.Errorf("index %s failed: %s", name, row.detail)
		case row.detail != last:
			fmt.Fprintf(stdout, "index %s on %s: %s\n", name, table, row.detail)
			last = row.detail
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// progressText describes a build's progress, "" when unknown.
func progressText(phase string, blocksDone, blocksTotal, tuplesDone, tuplesTotal int64) string {
	switch {
	case blocksTotal > 0:
		return fmt.Sprintf("%s: %d of %d blocks", phase, blocksDone, blocksTotal)
	case tuplesTotal > 0:
		return fmt.Sprintf("%s: %d of %d rows", phase, tuplesDone, tuplesTotal)
	}
	return phase
}

// indexDB declares indexes in the database directly.
type indexDB struct {
	pool    *pgxpool.Pool
	st      *store.Store
	account string
}

func openIndexDB(ctx context.Context, url, account string) (*indexDB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	store.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &indexDB{pool: pool, st: store.New(pool), account: account}, nil
}

func (d *indexDB) close() {
	d.st.Close()
	d.pool.Close()
}

func (d *indexDB) create(ctx context.Context, table string, spec tableapi.IndexSpec) (indexRow, error) {
	typ, ok := odata.ParseEdmType(spec.Type)
	if !ok {
		return indexRow{}, fmt.Errorf("%q is not an EDM type such as Edm.Int32", spec.Type)
	}
	ix, err := d.st.CreateIndex(ctx, d.account, table, store.IndexSpec{Property: spec.Property, Type: typ, AfterPartitionKey: spec.AfterPartitionKey})
	if err != nil {
		return indexRow{}, fmt.Errorf("create index: %w", err)
	}
	return storeRow(ix), nil
}

func (d *indexDB) list(ctx context.Context, table string) ([]indexRow, error) {
	ixs, err := d.st.Indexes(ctx, d.account, table)
	if err != nil {
		return nil, fmt.Errorf("list indexes: %w", err)
	}
	rows := make([]indexRow, len(ixs))
	for i, ix := range ixs {
		rows[i] = storeRow(ix)
	}
	return rows, nil
}

func (d *indexDB) drop(ctx context.Context, table, name string) error {
	if err := d.st.DropIndex(ctx, d.account, table, name); err != nil {
		return fmt.Errorf("drop index: %w", err)
	}
	return nil
}

func storeRow(ix store.Index) indexRow {
	r := indexRow{name: ix.Name, property: ix.Property, typ: ix.Type.String(), afterPK: ix.AfterPartitionKey, state: ix.State, detail: ix.Error}
	if p := ix.Progress; p != nil {
		r.detail = progressText(p.Phase, p.BlocksDone, p.BlocksTotal, p.TuplesDone, p.TuplesTotal)
	}
	return r
}

// indexAPI declares indexes through a server's index API.
type indexAPI struct{ c *tableapi.Client }

func dialIndexAPI(conn string) (*indexAPI, error) {
	c, err := tableapi.Dial(conn)
	if err != nil {
		return nil, err
	}
	return &indexAPI{c: c}, nil
}

func (a *indexAPI) close() {}

func (a *indexAPI) create(ctx context.Context, table string, spec tableapi.IndexSpec) (indexRow, error) {
	ix, err := a.c.CreateIndex(ctx, table, spec)
	return apiRow(ix), err
}

func (a *indexAPI) list(ctx context.Context, table string) ([]indexRow, error) {
	ixs, err := a.c.Indexes(ctx, table)
	rows := make([]indexRow, len(ixs))
	for i, ix := range ixs {
		rows[i] = apiRow(ix)
	}
	return rows, err
}

func (a *indexAPI) drop(ctx context.Context, table, name string) error {
	return a.c.DropIndex(ctx, table, name)
}

func apiRow(ix tableapi.Index) indexRow {
	r := indexRow{name: ix.Name, property: ix.Property, typ: ix.Type, afterPK: ix.AfterPartitionKey, state: ix.State, detail: ix.Error}
	if p := ix.Progress; p != nil {
		r.detail = progressText(p.Phase, p.BlocksDone, p.BlocksTotal, p.TuplesDone, p.TuplesTotal)
	}
	return r
}
