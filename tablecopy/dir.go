package tablecopy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// manifestName is the file that lists a dump's tables.
const manifestName = "manifest.json"

// dumpFormat names the layout of a dump, for the tools that read it.
const dumpFormat = "pgtables-dump/1"

// manifest is the contents of manifest.json.
type manifest struct {
	Format string          `json:"format"`
	Tables []manifestTable `json:"tables"`
}

type manifestTable struct {
	Name     string `json:"name"`
	File     string `json:"file"`
	Entities int64  `json:"entities"`
}

// Dir is a directory that holds a dump of tables: manifest.json, and for
// each table a file of its entities, one JSON object a line with the type
// of every property annotated as the protocol writes it.
type Dir struct {
	path   string
	mu     sync.Mutex
	tables map[string]*dumpFile // being written
	read   manifest
}

type dumpFile struct {
	mu sync.Mutex // a table's partitions are written at once
	f  *os.File
	w  *bufio.Writer
	n  int64
}

// OpenDir opens a dump to read.
func OpenDir(path string) (*Dir, error) {
	raw, err := os.ReadFile(filepath.Join(path, manifestName))
	if err != nil {
		return nil, fmt.Errorf("open dump: %w", err)
	}
	d := &Dir{path: path}
	if err := json.Unmarshal(raw, &d.read); err != nil {
		return nil, fmt.Errorf("open dump: %s: %w", manifestName, err)
	}
	if d.read.Format != dumpFormat {
		return nil, fmt.Errorf("open dump: format %q, want %q", d.read.Format, dumpFormat)
	}
	return d, nil
}

// CreateDir makes path, if need be, a dump to write; Close writes its
// manifest.
func CreateDir(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create dump: %w", err)
	}
	return &Dir{path: path, tables: map[string]*dumpFile{}}, nil
}

// Tables lists the dump's tables whose names begin with prefix.
func (d *Dir) Tables(_ context.Context, prefix string) ([]string, error) {
	var names []string
	for _, t := range d.read.Tables {
		if strings.HasPrefix(strings.ToLower(t.Name), strings.ToLower(prefix)) {
			names = append(names, t.Name)
		}
	}
	return names, nil
}

// Page reads up to 1,000 entities of a table from the continuation token
// on: the byte offset in its file.
func (d *Dir) Page(_ context.Context, table, filter, token string) ([]Entity, string, error) {
	if filter != "" {
		return nil, "", errors.New("a dump is read whole: no filter")
	}
	var file string
	for _, t := range d.read.Tables {
		if t.Name == table {
			file = t.File
		}
	}
	if file == "" {
		return nil, "", fmt.Errorf("dump has no table %s", table)
	}
	f, err := os.Open(filepath.Join(d.path, file))
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	offset := int64(0)
	if token != "" {
		if offset, err = strconv.ParseInt(token, 10, 64); err != nil {
			return nil, "", fmt.Errorf("dump token %q", token)
		}
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, "", err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var entities []Entity
	for len(entities) < 1000 {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			offset += int64(len(line))
			e, perr := parseEntity(line)
			if perr != nil {
				return nil, "", fmt.Errorf("%s at byte %d: %w", file, offset-int64(len(line)), perr)
			}
			entities = append(entities, e)
		}
		if err == io.EOF {
			return entities, "", nil
		}
		if err != nil {
			return nil, "", err
		}
	}
	if _, err := r.Peek(1); err == io.EOF {
		return entities, "", nil
	}
	return entities, strconv.FormatInt(offset, 10), nil
}

// CreateTable starts the table's file afresh.
func (d *Dir) CreateTable(_ context.Context, table string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.tables[table]; ok {
		return nil
	}
	// Table names are letters and digits: safe as file names everywhere.
	f, err := os.Create(filepath.Join(d.path, table+".jsonl"))
	if err != nil {
		return err
	}
	d.tables[table] = &dumpFile{f: f, w: bufio.NewWriterSize(f, 1<<20)}
	return nil
}

// Mark flushes the table's file and returns where it ends: its size and
// the entities in it.
func (d *Dir) Mark(table string) (string, error) {
	d.mu.Lock()
	t := d.tables[table]
	d.mu.Unlock()
	if t == nil {
		return "", fmt.Errorf("dump: table %s not created", table)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.w.Flush(); err != nil {
		return "", fmt.Errorf("dump %s: %w", table, err)
	}
	size, err := t.f.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", fmt.Errorf("dump %s: %w", table, err)
	}
	return strconv.FormatInt(size, 10) + "/" + strconv.FormatInt(t.n, 10), nil
}

// Resume opens the table's file of an earlier, unfinished copy into this
// dump, cut back to mark.
func (d *Dir) Resume(_ context.Context, table, mark string, _ bool) error {
	sizeText, countText, _ := strings.Cut(mark, "/")
	size, err1 := strconv.ParseInt(sizeText, 10, 64)
	count, err2 := strconv.ParseInt(countText, 10, 64)
	if err := errors.Join(err1, err2); err != nil || size < 0 {
		return fmt.Errorf("dump %s: mark %q", table, mark)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(d.path, table+".jsonl"), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("dump %s: %w", table, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("dump %s: %w", table, err)
	}
	if _, err := f.Seek(size, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("dump %s: %w", table, err)
	}
	d.tables[table] = &dumpFile{f: f, w: bufio.NewWriterSize(f, 1<<20), n: count}
	return nil
}

// Write appends entities to the table's file.
func (d *Dir) Write(_ context.Context, table string, entities []Entity) error {
	d.mu.Lock()
	t := d.tables[table]
	d.mu.Unlock()
	if t == nil {
		return fmt.Errorf("dump: table %s not created", table)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range entities {
		line, err := e.MarshalJSON()
		if err != nil {
			return err
		}
		t.w.Write(line)
		if err := t.w.WriteByte('\n'); err != nil {
			return fmt.Errorf("dump %s: %w", table, err)
		}
		t.n++
	}
	return nil
}

// Close finishes the files of the tables written and writes the manifest.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tables == nil {
		return nil
	}
	m := manifest{Format: dumpFormat, Tables: []manifestTable{}}
	var errs []error
	for name, t := range d.tables {
		errs = append(errs, t.w.Flush(), t.f.Sync(), t.f.Close())
		m.Tables = append(m.Tables, manifestTable{Name: name, File: name + ".jsonl", Entities: t.n})
	}
	sort.Slice(m.Tables, func(i, j int) bool { return m.Tables[i].Name < m.Tables[j].Name })
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	errs = append(errs, os.WriteFile(filepath.Join(d.path, manifestName), append(raw, '\n'), 0o644))
	d.tables = nil
	return errors.Join(errs...)
}
