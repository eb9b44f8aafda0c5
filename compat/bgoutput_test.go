package compat_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
)

// outputWhileRunning GETs background response id at f while it runs and returns its output.
func outputWhileRunning(t *testing.T, f *fixture, id string) []any {
	t.Helper()
	got := jsonAnswer(t, do(t, t.Context(), "GET", f.base+"/responses/"+id, nil), 200)
	if got.Str("status") != "in_progress" {
		t.Fatalf("GET while it runs: status %q", got.Str("status"))
	}
	return got.List("output")
}

// readUntil reads events of s until one of type typ at output_index index, passing each to
// seen; it fails at the end of the stream.
func readUntil(t *testing.T, s *sseStream, typ string, index int, seen func(wstest.Frame)) wstest.Frame {
	t.Helper()
	for {
		ev := s.next()
		if ev == nil || isTerminal(ev.Type()) {
			t.Fatalf("the stream ended before %s at output_index %d: %v", typ, index, ev)
		}
		seen(ev)
		if ev.Type() == typ && ev.Num("output_index") == index {
			return ev
		}
	}
}

// TestBackgroundGetShowsOutput: GET of a background response that runs shows its output as it
// stands, as the events a follower has read built it: the items done as their
// response.output_item.done carried them, and the item in progress as it was added (status
// in_progress) with what it holds so far — the text of its content part, the arguments of a
// call — at least what the follower had read, and no more than the follower reads next.
func TestBackgroundGetShowsOutput(t *testing.T) {
	t.Run("a message in progress", func(t *testing.T) {
		f := newFixture(t, realtime(server.Options{}))
		id := runningOn(t, f)
		s := openSSE(t, do(t, t.Context(), "GET", f.base+"/responses/"+id+"?stream=true", nil))
		added := readUntil(t, s, "response.output_item.added", 0, func(wstest.Frame) {})
		text, deltas := "", 0
		for deltas < 3 {
			readUntil(t, s, "response.output_text.delta", 0, func(ev wstest.Frame) { text += ev.Str("delta") })
			deltas++
		}
		out := outputWhileRunning(t, f, id)
		if len(out) != 1 {
			t.Fatalf("GET while it runs: output %v, want the message in progress", out)
		}
		msg := wstest.Frame(out[0].(map[string]any))
		if msg.Str("type") != "message" || msg.Str("status") != "in_progress" || msg.Str("role") != "assistant" || msg.Str("id") != added.Str("item", "id") {
			t.Fatalf("the message in progress: %v, added as %v", msg, added.Get("item"))
		}
		parts := msg.List("content")
		if len(parts) != 1 || wstest.Frame(parts[0].(map[string]any)).Str("type") != "output_text" {
			t.Fatalf("the message's content: %v", parts)
		}
		shown := wstest.Frame(parts[0].(map[string]any)).Str("text")
		if !strings.HasPrefix(shown, text) {
			t.Fatalf("GET shows the text %q, but the follower has read %q", shown, text)
		}
		for len(text) < len(shown) {
			readUntil(t, s, "response.output_text.delta", 0, func(ev wstest.Frame) { text += ev.Str("delta") })
		}
		if !strings.HasPrefix(text, shown) {
			t.Fatalf("GET showed the text %q, the follower reads %q", shown, text)
		}
	})
	t.Run("a call done and one in progress", func(t *testing.T) {
		f := newFixture(t, realtime(server.Options{}))
		ctx := t.Context()
		// Two calls whose arguments hold a string of at least 3,000 bytes, streamed at 65
		// tokens a second: about 10 s each, for the GET to come while the second one streams
		// even on a loaded machine.
		note := map[string]any{"type": "function", "name": "write_note", "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"text": map[string]any{"type": "string", "minLength": 3000}}, "required": []string{"text"}}}
		body := bgCreate("Write a note", map[string]any{"tools": []any{note},
			"metadata": map[string]string{sim.MetaSpeed: "65", sim.MetaParallel: "2"}})
		id := jsonAnswer(t, do(t, ctx, "POST", f.base+"/responses", body), 200).Str("id")
		t.Cleanup(func() { do(t, context.Background(), "POST", f.base+"/responses/"+id+"/cancel", nil).Body.Close() })
		s := openSSE(t, do(t, ctx, "GET", f.base+"/responses/"+id+"?stream=true", nil))
		done := readUntil(t, s, "response.output_item.done", 0, func(wstest.Frame) {})
		added := readUntil(t, s, "response.output_item.added", 1, func(wstest.Frame) {})
		args := ""
		for len(args) < 10 {
			readUntil(t, s, "response.function_call_arguments.delta", 1, func(ev wstest.Frame) { args += ev.Str("delta") })
		}
		out := outputWhileRunning(t, f, id)
		if len(out) != 2 {
			t.Fatalf("GET while it runs: %d items, want the call done and the one in progress: %v", len(out), out)
		}
		if got, want := mustJSON(t, out[0]), mustJSON(t, done.Get("item")); string(got) != string(want) {
			t.Fatalf("the call done: GET shows %s, its output_item.done carried %s", got, want)
		}
		call := wstest.Frame(out[1].(map[string]any))
		it := added.Obj("item")
		if call.Str("type") != "function_call" || call.Str("status") != "in_progress" || call.Str("id") != it.Str("id") ||
			call.Str("call_id") != it.Str("call_id") || call.Str("name") != it.Str("name") {
			t.Fatalf("the call in progress: %v, added as %v", call, it)
		}
		shown := call.Str("arguments")
		if !strings.HasPrefix(shown, args) {
			t.Fatalf("GET shows the arguments %q, but the follower has read %q", shown, args)
		}
		for len(args) < len(shown) {
			readUntil(t, s, "response.function_call_arguments.delta", 1, func(ev wstest.Frame) { args += ev.Str("delta") })
		}
		if !strings.HasPrefix(args, shown) {
			t.Fatalf("GET showed the arguments %q, the follower read %q", shown, args)
		}
	})
}
