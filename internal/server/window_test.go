package server

import (
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
)

// windowServer serves the sim with a context window of window tokens.
func windowServer(t *testing.T, window int) string {
	t.Helper()
	_, url := testServer(t, Options{Model: sim.NewSim(sim.SimOptions{ContextWindow: window})})
	return url
}

// expectWindowFailed checks that fs ends response.failed with the sim's context-window code.
func expectWindowFailed(t *testing.T, fs []wstest.Frame, window string) {
	t.Helper()
	last := fs[len(fs)-1]
	if last.Type() != "response.failed" || last.Str("response", "error", "code") != sim.CodeContextLengthExceeded ||
		!strings.Contains(last.Str("response", "error", "message"), "context window of "+window+" tokens") {
		t.Fatalf("terminal event %s, error %v; want response.failed %s", last.Type(), last.Get("response", "error"), sim.CodeContextLengthExceeded)
	}
}

// TestContextWindowAppendShape: in the append shape a response.append whose tool output would
// take the rollout past the sim's context window ends the rollout response.failed
// (context_length_exceeded), as an engine's full context does through the chat backend; the
// ended rollout takes no more appends (response_not_suspended, "it is ended") and the connection goes on.
// A rollout within the window is unaffected.
func TestContextWindowAppendShape(t *testing.T) {
	url := windowServer(t, 5000)
	c := dialAppend(t, url)
	big := strings.Repeat("lorem ipsum dolor sit amet ", 2000) // about 12,000 tokens

	c.Send(create("list the files", map[string]string{"sim.calls": "2"}, shell))
	done := c.Until("response.done")
	d := done[len(done)-1]
	id := d.Str("response_id")
	c.Send(map[string]any{"type": "response.append", "response_id": id, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": pendingIDs(d)[0], "output": "a.go b.go"}}})
	fs := c.Until("response.done")
	d = fs[len(fs)-1]
	if d.Str("response_id") != id {
		t.Fatalf("the append within the window: %v", d)
	}

	c.Send(map[string]any{"type": "response.append", "response_id": id, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": pendingIDs(d)[0], "output": big}}})
	expectWindowFailed(t, c.Until("response.completed", "response.incomplete", "response.failed"), "5000")

	c.Send(map[string]any{"type": "response.append", "response_id": id, "input": []any{
		map[string]any{"type": "function_call_output", "call_id": pendingIDs(d)[0], "output": "ok"}}})
	if e := c.ExpectError(409, "response_not_suspended", "response_id"); !strings.Contains(e.Str("error", "message"), "ended") {
		t.Fatalf("an append to the failed rollout: %v", e)
	}

	c.Send(create("hello", nil))
	if fs := c.Until("response.completed", "response.failed"); fs[len(fs)-1].Type() != "response.completed" {
		t.Fatalf("a create within the window after the failures: %v", fs[len(fs)-1])
	}
}

// TestContextWindowChatCompletions: a chat completion whose messages would pass the sim's
// context window is 400 context_length_exceeded naming messages, the request's member (it
// named input, a Responses API member), streamed or not; one within the window is answered.
func TestContextWindowChatCompletions(t *testing.T) {
	url := windowServer(t, 2000)
	big := strings.Repeat("lorem ipsum dolor sit amet ", 500) // about 3,000 tokens
	for _, stream := range []string{"false", "true"} {
		code, body := do(t, "POST", httpURL(url, "/v1/chat/completions"), "",
			`{"model":"sim","stream":`+stream+`,"messages":[{"role":"user","content":"`+big+`"}]}`)
		e, _ := body["error"].(map[string]any)
		if code != 400 || e["code"] != sim.CodeContextLengthExceeded || e["param"] != "messages" {
			t.Fatalf("stream %s: messages over the window: %d %v", stream, code, body)
		}
	}
	if code, body := do(t, "POST", httpURL(url, "/v1/chat/completions"), "", `{"model":"sim","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
		t.Fatalf("messages within the window: %d %v", code, body)
	}
}
