package compat_test

import (
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
)

// TestClientCallLeftOpenIsDemanded: a create may make a function_call of its own without
// answering it, but the continuation after it must answer it (missing_tool_output), on the
// hot path's connection as over HTTP, even when the input answers every call the rollout made.
func TestClientCallLeftOpenIsDemanded(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	clientCall := map[string]any{"type": "function_call", "call_id": "call_client", "name": "exec_command", "arguments": `{"cmd":"ls"}`}
	opts := func(prev string) map[string]any {
		m := map[string]any{"tools": []any{shell}, "metadata": map[string]string{"sim.calls": "3"}}
		if prev != "" {
			m["previous_response_id"] = prev
		}
		return m
	}
	refused := func(name string, msg map[string]any) {
		t.Helper()
		c.Send(msg)
		fs := c.Until("error", "response.completed", "response.incomplete", "response.failed")
		e := fs[len(fs)-1]
		if e.Type() != "error" || e.Str("error", "code") != "missing_tool_output" || !strings.Contains(e.Str("error", "message"), "call_client") {
			t.Fatalf("%s: %v, want missing_tool_output for call_client", name, e)
		}
	}

	// In the first input.
	r1 := turn(t, c, create([]any{userMsg("go"), clientCall}, opts("")))
	ids := callIDs(r1)
	if len(ids) != 1 {
		t.Fatalf("first turn: calls %v, want 1", ids)
	}
	refused("only the rollout's call answered", create([]any{toolOutput(ids[0], "ok")}, opts(respID(r1))))

	// In a continuation's input (which goes cold, the input not being only outputs).
	r1 = turn(t, c, create("go", opts("")))
	r2 := turn(t, c, create([]any{toolOutput(callIDs(r1)[0], "ok"), clientCall}, opts(respID(r1))))
	if ids = callIDs(r2); len(ids) != 1 {
		t.Fatalf("second turn: calls %v, want 1", ids)
	}
	refused("a cold continuation's own call", create([]any{toolOutput(ids[0], "ok")}, opts(respID(r2))))
	// Answered, the chain goes on.
	r3 := turn(t, c, create([]any{toolOutput(ids[0], "ok"), toolOutput("call_client", "mine")}, opts(respID(r2))))
	if final(r3).Type() != "response.completed" {
		t.Fatalf("answering both: %v", final(r3))
	}

	// Repeating the rollout's pending call does not answer it.
	r1 = turn(t, c, create("go", opts("")))
	pending := map[string]any{"type": "function_call", "call_id": callIDs(r1)[0], "name": "exec_command", "arguments": `{}`}
	c.Send(create([]any{pending}, opts(respID(r1))))
	fs := c.Until("error", "response.completed", "response.incomplete", "response.failed")
	if e := fs[len(fs)-1]; e.Type() != "error" || e.Str("error", "code") != "missing_tool_output" {
		t.Fatalf("a repeated pending call without its output: %v, want missing_tool_output", e)
	}

	// A call made and answered in the same input leaves nothing open: the next turn is hot.
	r1 = turn(t, c, create([]any{userMsg("go"), clientCall, toolOutput("call_client", "mine")}, opts("")))
	hot0 := f.srv.Counters().Hot.Load()
	r2 = turn(t, c, create([]any{toolOutput(callIDs(r1)[0], "ok")}, opts(respID(r1))))
	if final(r2).Type() != "response.completed" || f.srv.Counters().Hot.Load()-hot0 != 1 {
		t.Fatalf("answered client call: %v, hot %d", final(r2), f.srv.Counters().Hot.Load()-hot0)
	}
}
