package compat_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

// keyFile writes a compaction key file of lines and returns its Compactor, read as tether
// serve -compaction-key-file reads it.
func keyFile(t *testing.T, lines ...string) *session.Compactor {
	t.Helper()
	path := filepath.Join(t.TempDir(), "compaction.key")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := session.ReadCompactor(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// compactOn compacts input on f and returns the compaction item.
func compactOn(t *testing.T, f *fixture, input []any) any {
	t.Helper()
	st, cr := post(t, f.base+"/responses/compact", "sk-test", map[string]any{"model": "sim", "input": input})
	out, _ := cr.Get("output").([]any)
	if st != 200 || len(out) != 1 {
		t.Fatalf("compact: %d %v", st, cr)
	}
	return out[0]
}

// TestCompactionKeyShared: two servers that read the same key file (two instances behind a
// load balancer, or one restarted) accept each other's compaction items on HTTP, the append
// WebSocket and POST /v1/responses/compact, and the window has the same context (the sim's
// fingerprint) as the uncompacted input. A server with another key, or with the default
// per-process key, answers invalid_compaction_item. A key file of two lines signs with the first
// and accepts both (rotation).
func TestCompactionKeyShared(t *testing.T) {
	oldKey, newKey := strings.Repeat("k", 32), strings.Repeat("n", 40)
	a := newFixture(t, server.Options{Compaction: keyFile(t, oldKey)})
	b := newFixture(t, server.Options{Compaction: keyFile(t, oldKey)})
	other := newFixture(t, server.Options{Compaction: keyFile(t, strings.Repeat("o", 32))})
	perProcess := newFixture(t, server.Options{})
	rotated := newFixture(t, server.Options{Compaction: keyFile(t, newKey, oldKey)})

	_, direct := post(t, a.base+"/responses", "sk-test", map[string]any{"model": "sim", "store": false, "input": []any{userMsg("one"), userMsg("two")}})
	want := httpFingerprint(t, direct)
	cmp := compactOn(t, a, []any{userMsg("one")})
	next := []any{cmp, userMsg("two")}

	for name, f := range map[string]*fixture{"same key": b, "rotated": rotated} {
		if _, r := post(t, f.base+"/responses", "sk-test", map[string]any{"model": "sim", "store": false, "input": next}); httpFingerprint(t, r) != want {
			t.Fatalf("%s, HTTP: %s, want %s", name, httpFingerprint(t, r), want)
		}
		app := dialAppend(t, f)
		app.Send(create(next, map[string]any{"store": false}))
		if got := fingerprint(t, app.Until("response.completed")); got != want {
			t.Fatalf("%s, append WebSocket: %s, want %s", name, got, want)
		}
		again := compactOn(t, f, next) // compact opens the item too, and signs its own
		if _, r := post(t, f.base+"/responses", "sk-test", map[string]any{"model": "sim", "store": false, "input": []any{again}}); httpFingerprint(t, r) != want {
			t.Fatalf("%s: an item re-compacted on it: %s, want %s", name, httpFingerprint(t, r), want)
		}
	}

	for name, f := range map[string]*fixture{"another key": other, "per-process key": perProcess} {
		rejects(t, name, f, next)
	}
	// The rotated server signs with the new key, which a only has not.
	rejects(t, "old key only", a, []any{compactOn(t, rotated, []any{userMsg("one")})})
	if _, r := post(t, rotated.base+"/responses", "sk-test", map[string]any{"model": "sim", "store": false,
		"input": []any{compactOn(t, rotated, []any{userMsg("one")}), userMsg("two")}}); httpFingerprint(t, r) != want {
		t.Fatalf("rotated server, its own item: %s, want %s", httpFingerprint(t, r), want)
	}
}

// rejects checks that f answers invalid_compaction_item to input (a compaction item first) on
// HTTP and the append WebSocket.
func rejects(t *testing.T, name string, f *fixture, input []any) {
	t.Helper()
	if st, e := post(t, f.base+"/responses", "sk-test", map[string]any{"model": "sim", "input": input}); st != 400 ||
		e.Str("error", "code") != "invalid_compaction_item" || e.Str("error", "param") != "input[0]" {
		t.Fatalf("%s, HTTP: %d %v", name, st, e)
	}
	app := dialAppend(t, f)
	app.Send(create(input, nil))
	app.ExpectError(400, "invalid_compaction_item", "input[0]")
}

func dialAppend(t *testing.T, f *fixture) *wstest.Client {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer sk-test")
	h.Set("OpenAI-Beta", server.AppendBeta)
	return wstest.Dial(t, f.wsURL, h)
}
