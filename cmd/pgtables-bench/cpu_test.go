package main

import (
	"os/exec"
	"testing"
	"time"
)

// A process tree's CPU never goes down between two readings, however its
// children come and go: a child reaped while the tree is read is counted
// either alive or in its parent's reaped time, never in neither.
func TestTreeCPUNeverDrops(t *testing.T) {
	t.Parallel()
	// Children that each burn a few milliseconds of CPU and exit, one
	// after another, as a postmaster's short-lived backends do.
	parent := exec.Command("sh", "-c", `while :; do sh -c 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'; done`)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = parent.Process.Kill()
		_ = parent.Wait()
	})
	w := &cpuWatch{groups: []cpuGroup{{name: "tree", pid: parent.Process.Pid, tree: true}}}
	prev := w.sample()[0]
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		cur := w.sample()[0]
		if cur < prev {
			t.Fatalf("the tree's CPU went from %v down to %v", prev, cur)
		}
		prev = cur
	}
	if prev == 0 {
		t.Fatal("no CPU counted for a tree that burns it")
	}
}
