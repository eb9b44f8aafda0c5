package compat_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
)

// post sends body with key and returns the status and the decoded reply.
func post(t *testing.T, url, key string, body any) (int, wstest.Frame) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var f wstest.Frame
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return resp.StatusCode, f
}

func ref(id string) map[string]any { return map[string]any{"type": "item_reference", "id": id} }

func outputItem(f wstest.Frame, typ string) map[string]any {
	out, _ := f.Get("output").([]any)
	for _, it := range out {
		if m := it.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}

// TestItemReferenceHTTP: a reference to a stored function_call followed by its output
// continues a new chain; a reference to a stored message gives the model the same context as
// the message itself (equal fingerprints); unknown ids and another key's ids are 400 input[i].
func TestItemReferenceHTTP(t *testing.T) {
	f := newFixture(t, server.Options{Keys: server.NewKeys("sk-a", "sk-b")})
	url := f.base + "/responses"
	st, r1 := post(t, url, "sk-a", map[string]any{"model": "sim", "input": "Weather in Paris?", "tools": []any{weather}})
	call := outputItem(r1, "function_call")
	if st != 200 || call == nil {
		t.Fatalf("first turn: %d %v", st, r1)
	}
	st, r2 := post(t, url, "sk-a", map[string]any{"model": "sim", "tools": []any{weather}, "input": []any{
		userMsg("Weather in Paris?"), ref(call["id"].(string)), toolOutput(call["call_id"].(string), "sunny")}})
	if st != 200 || r2.Str("status") != "completed" {
		t.Fatalf("reference to a stored function_call + its output: %d %v", st, r2)
	}
	msg := outputItem(r2, "message")
	if msg == nil {
		t.Fatalf("no answer: %v", r2)
	}
	inline := map[string]any{"type": "message", "role": "assistant", "content": msg["content"]}
	_, byRef := post(t, url, "sk-a", map[string]any{"model": "sim", "input": []any{ref(msg["id"].(string)), userMsg("and now?")}})
	_, byCopy := post(t, url, "sk-a", map[string]any{"model": "sim", "input": []any{inline, userMsg("and now?")}})
	if a, b := httpFingerprint(t, byRef), httpFingerprint(t, byCopy); a != b {
		t.Fatalf("a referenced message and its copy give different contexts: %s vs %s", a, b)
	}
	st, e := post(t, url, "sk-a", map[string]any{"model": "sim", "input": []any{userMsg("x"), ref("msg_nope")}})
	if st != 400 || e.Str("error", "code") != "invalid_item_reference" || e.Str("error", "param") != "input[1]" {
		t.Fatalf("unknown id: %d %v", st, e)
	}
	st, e = post(t, url, "sk-b", map[string]any{"model": "sim", "input": []any{ref(msg["id"].(string))}})
	if st != 400 || e.Str("error", "param") != "input[0]" {
		t.Fatalf("another key's item: %d %v", st, e)
	}
}

func httpFingerprint(t *testing.T, r wstest.Frame) string {
	t.Helper()
	msg := outputItem(r, "message")
	if msg == nil {
		t.Fatalf("no answer: %v", r)
	}
	text := msg["content"].([]any)[0].(map[string]any)["text"].(string)
	i := bytes.LastIndex([]byte(text), []byte("[ctx "))
	if i < 0 {
		t.Fatalf("no fingerprint in %q", text)
	}
	return text[i:]
}

// TestItemReferenceWebSocket: with store:false, a reference resolves against the connection's
// cached responses; another connection does not see them.
func TestItemReferenceWebSocket(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	opts := map[string]any{"store": false, "tools": []any{weather}}
	r1 := turn(t, c, create("Weather in Paris?", opts))
	out, _ := final(r1).Get("response", "output").([]any)
	call := wstest.Frame(out[0].(map[string]any))
	r2 := turn(t, c, create([]any{userMsg("Weather in Paris?"), ref(call.Str("id")), toolOutput(call.Str("call_id"), "sunny")}, opts))
	if final(r2).Type() != "response.completed" || answer(r2) == "" {
		t.Fatalf("reference to a cached function_call: %v", final(r2))
	}
	c2 := f.dial(t)
	c2.Send(create([]any{ref(call.Str("id")), toolOutput(call.Str("call_id"), "sunny")}, opts))
	c2.ExpectError(400, "invalid_item_reference", "input[0]")
}

// TestItemReferenceAppend: on the append shape a reference resolves against the connection's
// rollouts; the referenced message and its copy give equal contexts; an unknown id is 400.
func TestItemReferenceAppend(t *testing.T) {
	f := newFixture(t, server.Options{})
	h := http.Header{}
	h.Set("OpenAI-Beta", server.AppendBeta)
	c := wstest.Dial(t, f.wsURL, h)
	c.Send(create("Remember cobalt", map[string]any{"store": false}))
	fs := c.Until("response.completed")
	msg := wstest.Frame(final(fs).Get("response", "output").([]any)[0].(map[string]any))
	inline := map[string]any{"type": "message", "role": "assistant", "content": msg.Get("content")}
	c.Send(create([]any{ref(msg.Str("id")), userMsg("and now?")}, map[string]any{"store": false}))
	byRef := c.Until("response.completed")
	c.Send(create([]any{inline, userMsg("and now?")}, map[string]any{"store": false}))
	byCopy := c.Until("response.completed")
	if a, b := fingerprint(t, byRef), fingerprint(t, byCopy); a != b {
		t.Fatalf("reference and copy differ: %s vs %s", a, b)
	}
	c.Send(create([]any{userMsg("x"), ref("msg_nope")}, nil))
	c.ExpectError(400, "invalid_item_reference", "input[1]")
}

// TestManyItemReferences: a create of many references, mixing the connection's own items, items
// only the store holds (another connection's) and repeats, resolves each to its item (the same
// context as the items copied inline); the first reference nothing holds is the error, however
// many resolvable ones surround it.
func TestManyItemReferences(t *testing.T) {
	f := newFixture(t, server.Options{})
	stored := final(turn(t, f.dial(t), create("Remember cobalt", nil)))
	c := f.dial(t)
	kept := final(turn(t, c, create("Remember amber", map[string]any{"store": false})))
	var refs, inline []any
	for range 500 {
		for _, r := range []wstest.Frame{stored, kept} {
			msg := wstest.Frame(r.Get("response", "output").([]any)[0].(map[string]any))
			refs = append(refs, ref(msg.Str("id")))
			inline = append(inline, map[string]any{"type": "message", "role": "assistant", "content": msg.Get("content")})
		}
	}
	opts := map[string]any{"store": false}
	byRef := turn(t, c, create(append(refs, userMsg("and now?")), opts))
	byCopy := turn(t, c, create(append(inline, userMsg("and now?")), opts))
	if a, b := fingerprint(t, byRef), fingerprint(t, byCopy); a != b {
		t.Fatalf("1,000 references and their copies differ: %s vs %s", a, b)
	}
	bad := append(append(append([]any(nil), refs[:700]...), ref("msg_nope")), refs[700:]...)
	c.Send(create(bad, opts))
	c.ExpectError(400, "invalid_item_reference", "input[700]")
}
