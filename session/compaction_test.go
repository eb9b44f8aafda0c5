package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherd/tether/protocol"
)

// TestReadCompactor: a key file holds one key per line (CRLF and blank lines allowed); the
// first key signs, every key verifies; empty, short or missing files are errors.
func TestReadCompactor(t *testing.T) {
	dir := t.TempDir()
	n := 0
	file := func(content string) string {
		n++
		path := filepath.Join(dir, fmt.Sprint("key", n))
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	oldKey, newKey := strings.Repeat("o", 32), strings.Repeat("n", 33)
	old, err := ReadCompactor(file(oldKey))
	if err != nil {
		t.Fatal(err)
	}
	both, err := ReadCompactor(file("\r\n" + newKey + "\r\n\n" + oldKey + "\r\n"))
	if err != nil || len(both.keys) != 2 || string(both.keys[0]) != newKey {
		t.Fatalf("two keys: %v %q", err, both.keys)
	}
	window := []protocol.Item{{Type: protocol.ItemMessage, Role: protocol.RoleUser,
		Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: "hi"}}}}
	if got, err := both.Expand([]protocol.Item{old.Compact(window)}); err != nil || len(got) != 1 || got[0].Content[0].Text != "hi" {
		t.Fatalf("an old key's item under the rotated keys: %v %v", got, err)
	}
	if _, err := old.Expand([]protocol.Item{both.Compact(window)}); protocol.ErrorOf(err).Code != protocol.CodeInvalidCompaction {
		t.Fatalf("the new key's item under the old key only: %v", err)
	}
	var perProcess *Compactor
	if _, err := perProcess.Expand([]protocol.Item{old.Compact(window)}); err == nil {
		t.Fatal("the per-process key accepted another key's item")
	}
	if got, err := perProcess.Expand([]protocol.Item{perProcess.Compact(window)}); err != nil || len(got) != 1 {
		t.Fatalf("per-process round trip: %v %v", got, err)
	}
	for _, bad := range []string{file(""), file("\n\n"), file(oldKey + "\n" + strings.Repeat("s", 31)), filepath.Join(dir, "missing")} {
		if _, err := ReadCompactor(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := NewCompactor(); err == nil {
		t.Error("NewCompactor(): no error")
	}
}

// TestWriteItemsIsTheirJSON: the window a compaction seals is written item by item, in
// pieces of about 32 KiB, and is the text encoding/json gives for the whole list (without
// its HTML escaping, which the protocol's encoder does not do).
func TestWriteItemsIsTheirJSON(t *testing.T) {
	for _, n := range []int{0, 1, 5000} {
		items := make([]protocol.Item, n)
		for i := range items {
			items[i] = protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleUser, ID: fmt.Sprintf("msg_%d", i),
				Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: strings.Repeat("é<", i%50)}}}
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(items); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		writeItems(&got, items)
		if !bytes.Equal(got.Bytes(), bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("%d items: written text differs from encoding/json's (%d vs %d bytes)", n, got.Len(), want.Len()-1)
		}
	}
}
