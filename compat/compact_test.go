package compat_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
)

// TestCompact: POST /v1/responses/compact returns a response.compaction whose output is one
// compaction item; a new chain that starts from that window (no previous_response_id) has the
// context the window stands for — its answer's fingerprint equals the uncompacted chain's — on
// HTTP, the public WebSocket and the append WebSocket. Forged items are 400 input[i] on each.
func TestCompact(t *testing.T) {
	f := newFixture(t, server.Options{Keys: server.NewKeys("sk-a", "sk-b")})
	url := f.base + "/responses"
	_, r1 := post(t, url, "sk-a", map[string]any{"model": "sim", "instructions": "Be brief.", "input": "Remember the code word: cobalt"})
	_, r2 := post(t, url, "sk-a", map[string]any{"model": "sim", "instructions": "Be brief.", "previous_response_id": r1.Str("id"), "input": "What is the code word?"})
	want := httpFingerprint(t, r2)

	st, cr := post(t, url+"/compact", "sk-a", map[string]any{"model": "sim", "instructions": "Be brief.", "previous_response_id": r1.Str("id")})
	out, _ := cr.Get("output").([]any)
	if st != 200 || cr.Str("object") != "response.compaction" || !strings.HasPrefix(cr.Str("id"), "resp_") || len(out) != 1 || cr.Get("usage") == nil {
		t.Fatalf("compact: %d %v", st, cr)
	}
	cmp := out[0].(map[string]any)
	if cmp["type"] != "compaction" || cmp["id"] == "" || cmp["encrypted_content"] == "" {
		t.Fatalf("compaction item: %v", cmp)
	}
	next := []any{cmp, userMsg("What is the code word?")}

	_, h := post(t, url, "sk-a", map[string]any{"model": "sim", "store": false, "input": next})
	if got := httpFingerprint(t, h); got != want {
		t.Fatalf("HTTP: a chain from the compacted window saw %s, the original chain %s", got, want)
	}
	if !strings.Contains(answerText(t, h), "cobalt") {
		t.Fatalf("HTTP: the compacted window lost the code word: %q", answerText(t, h))
	}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer sk-a")
	pub := wstest.Dial(t, f.wsURL, hdr)
	if got := fingerprint(t, turn(t, pub, create(next, map[string]any{"store": false}))); got != want {
		t.Fatalf("public WebSocket: %s, want %s", got, want)
	}
	hdr.Set("OpenAI-Beta", server.AppendBeta)
	app := wstest.Dial(t, f.wsURL, hdr)
	app.Send(create(next, map[string]any{"store": false}))
	if got := fingerprint(t, app.Until("response.completed")); got != want {
		t.Fatalf("append WebSocket: %s, want %s", got, want)
	}

	forged := map[string]any{"type": "compaction", "encrypted_content": strings.Replace(cmp["encrypted_content"].(string), "tcmp1.", "tcmp1.A", 1)}
	alien := map[string]any{"type": "compaction", "encrypted_content": "gAAAAABpM0Yj-forged="}
	for _, bad := range []any{forged, alien} {
		in := []any{userMsg("hi"), bad}
		if st, e := post(t, url, "sk-a", map[string]any{"model": "sim", "input": in}); st != 400 || e.Str("error", "code") != "invalid_compaction_item" || e.Str("error", "param") != "input[1]" {
			t.Fatalf("HTTP forged compaction: %d %v", st, e)
		}
		for _, c := range []*wstest.Client{pub, app} {
			c.Send(create(in, nil))
			c.ExpectError(400, "invalid_compaction_item", "input[1]")
		}
	}
	if st, e := post(t, url+"/compact", "sk-a", map[string]any{"model": "sim", "input": []any{forged}}); st != 400 || e.Str("error", "param") != "input[0]" {
		t.Fatalf("compact of a forged item: %d %v", st, e)
	}
}

// TestCompactErrors: model is required; another key's previous_response_id is not found; a
// create-only field is unsupported; a plain input compacts and round-trips.
func TestCompactErrors(t *testing.T) {
	f := newFixture(t, server.Options{Keys: server.NewKeys("sk-a", "sk-b")})
	url := f.base + "/responses"
	if st, e := post(t, url+"/compact", "sk-a", map[string]any{"input": "hi"}); st != 400 || e.Str("error", "code") != "missing_required_parameter" || e.Str("error", "param") != "model" {
		t.Fatalf("missing model: %d %v", st, e)
	}
	_, r1 := post(t, url, "sk-a", map[string]any{"model": "sim", "input": "secret"})
	if st, e := post(t, url+"/compact", "sk-b", map[string]any{"model": "sim", "previous_response_id": r1.Str("id")}); st != 400 || e.Str("error", "code") != "previous_response_not_found" {
		t.Fatalf("another key's parent: %d %v", st, e)
	}
	if st, e := post(t, url+"/compact", "sk-a", map[string]any{"model": "sim", "input": "hi", "max_output_tokens": 64}); st != 400 || e.Str("error", "param") != "max_output_tokens" {
		t.Fatalf("max_output_tokens on compact: %d %v", st, e)
	}
	// What the Codex CLI sends with a compaction (codex-api CompactionInput).
	codex := map[string]any{"model": "sim", "input": []any{userMsg("one")}, "instructions": "Summarise.", "tools": []any{shell},
		"parallel_tool_calls": true, "reasoning": map[string]any{"effort": "medium", "summary": "auto"}, "service_tier": "priority",
		"prompt_cache_key": "thread-1", "text": map[string]any{"verbosity": "low"}}
	if st, e := post(t, url+"/compact", "sk-a", codex); st != 200 || e.Str("object") != "response.compaction" {
		t.Fatalf("Codex's compaction body: %d %v", st, e)
	}
	_, direct := post(t, url, "sk-a", map[string]any{"model": "sim", "store": false, "input": []any{userMsg("one"), userMsg("two")}})
	_, cr := post(t, url+"/compact", "sk-a", map[string]any{"model": "sim", "input": []any{userMsg("one")}})
	_, via := post(t, url, "sk-a", map[string]any{"model": "sim", "store": false, "input": []any{cr.Get("output").([]any)[0], userMsg("two")}})
	if a, b := httpFingerprint(t, direct), httpFingerprint(t, via); a != b {
		t.Fatalf("compacted input: %s, direct: %s", b, a)
	}
}

func answerText(t *testing.T, r wstest.Frame) string {
	t.Helper()
	return outputItem(r, "message")["content"].([]any)[0].(map[string]any)["text"].(string)
}

// TestCompactTooLargeRefused: a compaction whose window is over what a compaction item may
// stand for (seventy item_references to a stored MiB: 70 MiB of JSON) is refused 400
// rollout_too_large, param input; it was answered 200 with an item every create then refused
// as invalid_compaction_item ("its window does not decode"). Two thousand, over the memory
// budget as well, get the same answer, not 503 server_overloaded ("retry later"). Ten are compacted, and a
// create from that item reaches the model (whose window of 300,000 tokens refuses it).
func TestCompactTooLargeRefused(t *testing.T) {
	f := windowFixture(t, 300_000)
	url := f.base + "/responses"
	item := strings.Repeat("lorem ipsum dolor sit amet ", (1<<20)/27)
	st, stored := post(t, url, "", map[string]any{"model": "sim", "store": true, "max_output_tokens": 16,
		"input": []any{map[string]any{"type": "message", "role": "user", "id": "msg_compact_big", "content": item}}})
	if st != 200 || stored.Str("status") == "failed" {
		t.Fatalf("storing the item: %d %v", st, stored.Get("error"))
	}
	refs := func(n int) []any {
		var in []any
		for range n {
			in = append(in, ref("msg_compact_big"))
		}
		return in
	}
	for _, n := range []int{70, 2000} { // 2000 MiB: over the memory budget too, which no retry fixes
		st, e := post(t, url+"/compact", "", map[string]any{"model": "sim", "input": refs(n)})
		if st != 400 || e.Str("error", "code") != "rollout_too_large" || e.Str("error", "param") != "input" {
			t.Fatalf("%d references compacted: %d %s error %v", n, st, e.Str("object"), e.Get("error"))
		}
	}
	st, cr := post(t, url+"/compact", "", map[string]any{"model": "sim", "input": refs(10)})
	out, _ := cr.Get("output").([]any)
	if st != 200 || len(out) != 1 {
		t.Fatalf("ten references compacted: %d %v", st, cr.Get("error"))
	}
	st, r := post(t, url, "", map[string]any{"model": "sim", "store": false, "max_output_tokens": 16, "input": []any{out[0], userMsg("go")}})
	if st != 200 || !windowFailed(r, "300000") {
		t.Fatalf("a create from ten references' compaction: %d %v", st, r.Get("error"))
	}
}
