package session

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
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
	if got, err := both.Expand([]protocol.Item{sealed(t, old, window)}); err != nil || len(got) != 1 || got[0].Content[0].Text != "hi" {
		t.Fatalf("an old key's item under the rotated keys: %v %v", got, err)
	}
	if _, err := old.Expand([]protocol.Item{sealed(t, both, window)}); protocol.ErrorOf(err).Code != protocol.CodeInvalidCompaction {
		t.Fatalf("the new key's item under the old key only: %v", err)
	}
	var perProcess *Compactor
	if _, err := perProcess.Expand([]protocol.Item{sealed(t, old, window)}); err == nil {
		t.Fatal("the per-process key accepted another key's item")
	}
	if got, err := perProcess.Expand([]protocol.Item{sealed(t, perProcess, window)}); err != nil || len(got) != 1 {
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

// sealed is c.Compact(window), which must succeed.
func sealed(t *testing.T, c *Compactor, window []protocol.Item) protocol.Item {
	t.Helper()
	it, err := c.Compact(window)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	return it
}

// TestCompactRefusesWhatExpandRefuses: a window Expand would not take back is refused by
// Compact (rollout_too_large, param input) instead of sealed: one whose JSON is over 64 MiB,
// and one whose encrypted_content would be over protocol.MaxTextLength characters (text that
// does not compress). A window just within both round-trips.
func TestCompactRefusesWhatExpandRefuses(t *testing.T) {
	var c *Compactor
	msg := func(text string) protocol.Item {
		return protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleUser,
			Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: text}}}
	}
	prose := strings.Repeat("lorem ipsum dolor sit amet ", (1<<20)/27)
	var big []protocol.Item
	for range 70 { // 70 MiB of JSON, compressing to a few MiB
		big = append(big, msg(prose))
	}
	if _, err := c.Compact(big); protocol.ErrorOf(err).Code != protocol.CodeRolloutTooLarge || protocol.ErrorOf(err).Param != "input" {
		t.Fatalf("a window of 70 MiB of JSON: %v", err)
	}
	if got, err := c.Expand([]protocol.Item{sealed(t, c, big[:60])}); err != nil || len(got) != 60 {
		t.Fatalf("a window of 60 MiB of JSON: %d items, %v", len(got), err)
	}

	// Two texts of 6 MiB of random base64 (each within a create's bounds): deflate keeps about
	// three quarters of them, base64 makes that 12 MiB of encrypted_content again.
	noise := func() string {
		raw := make([]byte, 9<<19)
		_, _ = rand.Read(raw)
		return base64.StdEncoding.EncodeToString(raw)
	}
	window := []protocol.Item{msg(noise()), msg(noise())}
	if _, err := c.Compact(window); protocol.ErrorOf(err).Code != protocol.CodeRolloutTooLarge {
		t.Fatalf("a window whose encrypted_content is over %d characters: %v", protocol.MaxTextLength, err)
	}
}
