package changefeed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Checkpoint keeps a follower's cursor between runs.
type Checkpoint interface {
	// Load returns the saved cursor; ok is false when none was saved.
	Load(ctx context.Context) (cursor string, ok bool, err error)
	// Save keeps cursor; once it returns, a Load after a crash sees it.
	Save(ctx context.Context, cursor string) error
}

// FileCheckpoint keeps the cursor in a file, one line, replaced
// atomically: written to a temporary file beside it, synced, renamed over
// it, and the directory synced, so a crash leaves the old cursor or the
// new one, never a torn one.
type FileCheckpoint struct{ Path string }

// Load reads the file; a missing or empty one is no checkpoint.
func (f FileCheckpoint) Load(context.Context) (string, bool, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("checkpoint: %w", err)
	}
	cursor := strings.TrimSpace(string(b))
	if strings.ContainsAny(cursor, " \t\r\n") {
		return "", false, fmt.Errorf("checkpoint %s: not one cursor", f.Path)
	}
	return cursor, cursor != "", nil
}

// Save replaces the file with cursor.
func (f FileCheckpoint) Save(_ context.Context, cursor string) error {
	if err := f.save(cursor); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func (f FileCheckpoint) save(cursor string) error {
	dir := filepath.Dir(f.Path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(f.Path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; else a leftover
	if _, err := tmp.WriteString(cursor + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
