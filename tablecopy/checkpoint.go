package tablecopy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Checkpoint is a copy's progress, kept in a file so that a copy stopped
// midway (killed, or failed) continues where it stopped: per table, the
// continuation of the first page not yet written in full, and where the
// destination's data of the table ended then.
type Checkpoint struct {
	path string
	mu   sync.Mutex
	st   checkpointFile
}

type checkpointFile struct {
	Version int                        `json:"version"`
	Tables  map[string]tableCheckpoint `json:"tables"`
}

type tableCheckpoint struct {
	Token    string `json:"token,omitempty"` // the next page's continuation; "" with Done
	Entities int64  `json:"entities"`        // written so far
	Mark     string `json:"mark,omitempty"`  // the destination's position, for a dump
	Done     bool   `json:"done,omitempty"`
}

// OpenCheckpoint reads the checkpoint file at path, or starts one.
func OpenCheckpoint(path string) (*Checkpoint, error) {
	c := &Checkpoint{path: path, st: checkpointFile{Version: 1, Tables: map[string]tableCheckpoint{}}}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := json.Unmarshal(raw, &c.st); err != nil || c.st.Version != 1 || c.st.Tables == nil {
		return nil, fmt.Errorf("checkpoint %s: not a checkpoint of this version: %v", path, err)
	}
	return c, nil
}

func (c *Checkpoint) table(name string) tableCheckpoint {
	if c == nil {
		return tableCheckpoint{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Tables[name]
}

// save records a table's progress, replacing the file whole so that a
// kill leaves the old one or the new one.
func (c *Checkpoint) save(name string, t tableCheckpoint) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.Tables[name] = t
	raw, err := json.MarshalIndent(c.st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".*")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// resumable is a destination that keeps what it was given in order (a
// dump), which a continued copy must cut back to where its checkpoint was
// taken, or it would hold the entities written after it twice.
type resumable interface {
	// Mark makes what was written of table durable and says where it ends.
	Mark(table string) (string, error)
	// Resume starts table again at mark, as it was when Mark said it; done
	// says it is complete.
	Resume(ctx context.Context, table, mark string, done bool) error
}
