package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `pgtables copy` from a dump to a directory writes the same dump, names
// what it copied, and refuses what it cannot do with a non-zero exit.
func TestCopyCommand(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "out")
	lines := `{"PartitionKey":"a","RowKey":"1","N@odata.type":"Edm.Int64","N":"9007199254740993","D@odata.type":"Edm.Double","D":5}` + "\n" +
		`{"PartitionKey":"b","RowKey":"2","S":"x"}` + "\n"
	if err := os.WriteFile(filepath.Join(src, "Things.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := `{"format":"pgtables-dump/1","tables":[{"name":"Things","file":"Things.jsonl","entities":2}]}`
	if err := os.WriteFile(filepath.Join(src, "manifest.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"copy", "-from", src, "-to", dst, "-checkpoint", filepath.Join(t.TempDir(), "cp"), "-verify"}, env(nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "copied 2 entities of 1 tables") || !strings.Contains(out.String(), "verify Things: 2 entities, equal") {
		t.Errorf("summary: %q", out.String())
	}
	got, err := os.ReadFile(filepath.Join(dst, "Things.jsonl"))
	if err != nil || string(got) != lines {
		t.Errorf("copied dump:\n%s\nwant\n%s (%v)", got, lines, err)
	}
	for _, args := range [][]string{
		{"copy"},
		{"copy", "-from", src},
		{"copy", "-from", filepath.Join(src, "none"), "-to", dst},
		{"copy", "-from", "AccountName=a", "-to", dst},
		{"copy", "-from", src, "-to", dst, "extra"},
	} {
		if err := run(context.Background(), args, env(nil), io.Discard, io.Discard); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// `pgtables copy -verify` of a source that writes whole-number Doubles
// beyond the Int32 range bare, as Azurite does, copies them as Doubles and
// verifies them equal, rather than failing on an Int32 out of range.
func TestCopyVerifyBareWholeDoubles(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "out")
	lines := `{"PartitionKey":"a","RowKey":"1","Big":27780995601534970000,"Over":2147483648,"I":7}` + "\n"
	manifest := `{"format":"pgtables-dump/1","tables":[{"name":"Things","file":"Things.jsonl","entities":1}]}`
	for name, text := range map[string]string{"Things.jsonl": lines, "manifest.json": manifest} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"copy", "-from", src, "-to", dst, "-checkpoint", filepath.Join(t.TempDir(), "cp"), "-verify"}, env(nil), &out, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "verify Things: 1 entities, equal") {
		t.Errorf("summary: %q", out.String())
	}
	want := `{"PartitionKey":"a","RowKey":"1","Big@odata.type":"Edm.Double","Big":27780995601534970000,"Over@odata.type":"Edm.Double","Over":2147483648,"I":7}` + "\n"
	if got, err := os.ReadFile(filepath.Join(dst, "Things.jsonl")); err != nil || string(got) != want {
		t.Errorf("copied dump:\n%s\nwant\n%s (%v)", got, want, err)
	}
}
