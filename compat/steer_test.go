package compat_test

import (
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
)

func steer(prev string, input any) map[string]any {
	return map[string]any{"type": "response.steer", "previous_response_id": prev, "input": input}
}

// TestSteerInterruptsAndContinues: a steer sent while a response streams is accepted, the
// response ends incomplete (steered), and a successor in the same lane continues from it with
// the steer's input appended.
func TestSteerInterruptsAndContinues(t *testing.T) {
	f := newFixture(t, realtime(server.Options{}))
	c := f.dial(t)
	c.Send(inLane("main", "write a long essay", map[string]any{"metadata": slow("80")}))
	first := c.Until("response.output_text.delta")
	id := respID(first)
	c.Send(steer(id, "Mention the word zircon."))
	rest := c.Until("response.incomplete")
	all := append(first, rest...)
	var accepted wstest.Frame
	for _, fr := range rest {
		if fr.Type() == "response.steer.accepted" {
			accepted = fr
		}
	}
	if accepted == nil || accepted.Str("steer", "previous_response_id") != id || !strings.HasPrefix(accepted.Str("steer", "id"), "steer_") {
		t.Fatalf("no response.steer.accepted for %s in %v", id, rest)
	}
	inc := final(all)
	if inc.Str("response", "incomplete_details", "reason") != "steered" || inc.Str("stream_id") != "main" {
		t.Fatalf("steered response ended %v", inc)
	}
	next := c.Until("response.completed")
	if next[0].Type() != "response.created" || next[0].Str("response", "previous_response_id") != id || next[0].Str("stream_id") != "main" {
		t.Fatalf("successor: %v", next[0])
	}
	wstest.CheckGrammar(t, "public", next)
	if !strings.Contains(answer(next), "zircon") {
		t.Fatalf("the successor did not see the steer's input: %q", answer(next))
	}
	// The connection core counts the successor as a turn of the rollout (it hears Steered
	// beside the shape's sink).
	if turns := rolloutTurns(f, id); turns != 2 {
		t.Fatalf("the steered rollout has %d turns, want 2 (the create and its successor)", turns)
	}
	// The successor is a response like any other: it can be continued.
	r := turn(t, c, create("and then?", map[string]any{"previous_response_id": respID(next)}))
	if final(r).Type() != "response.completed" {
		t.Fatalf("continuation of the successor: %v", final(r))
	}
}

// rolloutTurns returns the turns of the live rollout key on f's server (-1 when not there).
func rolloutTurns(f *fixture, key string) int {
	for _, cs := range f.srv.Snapshot() {
		for _, r := range cs.Rollouts {
			if r.Key == key {
				return r.Turns
			}
		}
	}
	return -1
}

// TestSteerFailures: every steer that cannot be taken gets response.steer.failed with the
// reference's codes, and the connection stays usable.
func TestSteerFailures(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	done := turn(t, c, create("hello", nil))
	cases := []struct {
		frame map[string]any
		code  string
	}{
		{steer("resp_unknown", "x"), "response_not_found"},
		{steer(respID(done), "x"), "response_already_completed"},
		{steer(respID(done), []any{map[string]any{"type": "message", "role": "assistant", "content": "x"}}), "invalid_input"},
		{steer(respID(done), []any{}), "invalid_input"},
		{steer(respID(done), "   "), "invalid_input"},
		{steer(respID(done), []any{map[string]any{"type": "message", "role": "user", "content": ""}}), "invalid_input"},
		{map[string]any{"type": "response.steer", "input": "x"}, "invalid_input"},
		{map[string]any{"type": "response.steer", "event_id": 5, "previous_response_id": respID(done), "input": "x"}, "invalid_input"},
		{map[string]any{"type": "response.steer", "event_id": map[string]any{}, "previous_response_id": respID(done), "input": "x"}, "invalid_input"},
		{map[string]any{"type": "response.steer", "event_id": "evt_1", "previous_response_id": respID(done), "input": "x"}, "response_already_completed"},
		{map[string]any{"type": "response.steer", "previous_response_id": respID(done), "input": "x", "metadata": map[string]any{}}, "invalid_input"},
		{map[string]any{"type": "response.steer", "previous_response_id": respID(done), "inptu": "x"}, "invalid_input"},
	}
	for _, tc := range cases {
		c.Send(tc.frame)
		fr := c.Next()
		if fr.Type() != "response.steer.failed" || fr.Str("error", "code") != tc.code || fr.Str("error", "type") != "invalid_request_error" {
			t.Fatalf("%v: got %v, want response.steer.failed %s", tc.frame, fr, tc.code)
		}
	}
	turn(t, c, create("still usable", nil))
	// A failure about a response of a lane carries the lane.
	onLane := turn(t, c, inLane("L", "on a lane", nil))
	c.Send(steer(respID(onLane), "x"))
	if fr := c.Next(); fr.Str("error", "code") != "response_already_completed" || fr.Str("stream_id") != "L" {
		t.Fatalf("steer.failed for a lane's response: %v", fr)
	}
}

// TestSteerPendingAfterToolCall: a steer that arrives when the response has already made a
// complete tool call waits for its output: response.steer.pending follows the terminal event,
// and the steer's input follows the tool output in the continuation.
func TestSteerPendingAfterToolCall(t *testing.T) {
	f := newFixture(t, realtime(server.Options{}))
	c := f.dial(t)
	meta := map[string]string{"sim.speed": "65", "sim.parallel": "2", "sim.calls": "2"}
	c.Send(create("use the tools", map[string]any{"tools": []any{shell}, "metadata": meta}))
	first := c.Until("response.output_item.done")
	if first[len(first)-1].Str("item", "type") != "function_call" {
		t.Fatalf("want a finished call first, got %v", first[len(first)-1])
	}
	id := respID(first)
	c.Send(steer(id, "Also mention basalt."))
	rest := c.Until("response.completed")
	pending := c.Next()
	if pending.Type() != "response.steer.pending" || pending.Str("reason") != "waiting_for_required_input" {
		t.Fatalf("after the terminal event: %v", pending)
	}
	all := append(first, rest...)
	var ids []string // the calls that completed; the one cut short is not pending
	out, _ := final(all).Get("response", "output").([]any)
	for _, it := range out {
		if m := wstest.Frame(it.(map[string]any)); m.Str("type") == "function_call" && m.Str("status") == "completed" {
			ids = append(ids, m.Str("call_id"))
		}
	}
	req, _ := pending.Get("required_input").([]any)
	if len(ids) != 1 || len(req) != 1 || wstest.Frame(req[0].(map[string]any)).Str("call_id") != ids[0] {
		t.Fatalf("required_input %v, complete calls %v", req, ids)
	}
	if pending.Num("sequence_number") != final(all).Num("sequence_number")+1 {
		t.Fatalf("steer.pending sequence_number %d after terminal %d", pending.Num("sequence_number"), final(all).Num("sequence_number"))
	}
	// Answer the calls (same settings: the hot path) until the rollout answers.
	r := all
	for i := 0; answer(r) == "" && i < 5; i++ {
		if i > 0 {
			ids = callIDs(r)
		}
		var outs []any
		for _, id := range ids {
			outs = append(outs, toolOutput(id, "ok"))
		}
		r = turn(t, c, create(outs, map[string]any{"tools": []any{shell}, "previous_response_id": respID(r), "metadata": meta}))
	}
	if !strings.Contains(answer(r), "basalt") {
		t.Fatalf("the answer after the pending steer did not see its input: %q", answer(r))
	}
}

// noSteer hides the sim's sampler.Steerable: a backend that cannot steer.
type noSteer struct{ sampler.Model }

// TestSteerNotSupported: a backend that cannot steer answers steering_not_supported, attributed
// to the response's lane; the response goes on unharmed.
func TestSteerNotSupported(t *testing.T) {
	f := newFixture(t, server.Options{Model: noSteer{sim.NewSim(sim.SimOptions{Realtime: true})}})
	c := f.dial(t)
	c.Send(inLane("l", "go slowly", map[string]any{"metadata": slow("40")}))
	first := c.Until("response.output_text.delta")
	c.Send(steer(respID(first), "x"))
	rest := c.Until("response.steer.failed")
	if fr := final(rest); fr.Str("error", "code") != "steering_not_supported" || fr.Str("stream_id") != "l" {
		t.Fatalf("steer on a backend without steering: %v", fr)
	}
	if end := c.Until("response.completed", "response.incomplete"); final(end).Type() != "response.completed" {
		t.Fatalf("the response was harmed: %v", final(end))
	}
}

// TestSteersNamingASteeredResponse: steers that keep naming the first response of a rollout
// while earlier steers have each started a successor follow the chain of successors to the
// one in flight: each is accepted and steers it, and the last successor sees every input.
func TestSteersNamingASteeredResponse(t *testing.T) {
	f := newFixture(t, realtime(server.Options{}))
	c := f.dial(t)
	c.Send(inLane("main", "write a long essay", map[string]any{"metadata": slow("80")}))
	id := respID(c.Until("response.output_text.delta"))
	for i, word := range []string{"zircon", "basalt", "quartz"} {
		c.Send(steer(id, "Mention the word "+word+"."))
		fs := c.Until("response.steer.accepted", "response.steer.failed")
		if got := fs[len(fs)-1]; got.Type() != "response.steer.accepted" {
			t.Fatalf("steer %d naming %s: %v", i+1, id, got)
		}
		c.Until("response.incomplete")
		c.Until("response.output_text.delta") // the successor streams
	}
	last := c.Until("response.completed")
	for _, word := range []string{"zircon", "basalt", "quartz"} {
		if !strings.Contains(answer(last), word) {
			t.Errorf("the last successor did not see %q: %q", word, answer(last))
		}
	}
}
