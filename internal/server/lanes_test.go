package server

import (
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
)

// TestAppendLanes: the append shape takes stream_id on its create; every event of the lane's
// rollout carries it (response.done too, and the events after a response.append, which names
// no lane); a slow lane does not hold up another; the default lane carries none.
func TestAppendLanes(t *testing.T) {
	_, url := testServer(t, Options{Model: sim.NewSim(sim.SimOptions{Realtime: true})})
	c := dialAppend(t, url)
	slow := create("slow task", map[string]string{"sim.speed": "65", "sim.answer_tokens": "120"})
	slow["stream_id"] = "slow"
	tool := create("tool task", map[string]string{"sim.calls": "1"}, shell)
	tool["stream_id"] = "tools"
	c.Send(slow)
	c.Send(tool)
	var done wstest.Frame
	byLane := map[string][]wstest.Frame{}
	for done == nil {
		f := c.Next()
		byLane[f.Str("stream_id")] = append(byLane[f.Str("stream_id")], f)
		if f.Type() == "response.done" {
			done = f
		}
		if f.Type() == "response.completed" {
			t.Fatalf("a response completed before the tool lane suspended: %v", f)
		}
	}
	if done.Str("stream_id") != "tools" {
		t.Fatalf("response.done without its lane: %v", done)
	}
	c.Send(map[string]any{"type": "response.append", "response_id": done.Str("response_id"), "input": []any{
		map[string]any{"type": "function_call_output", "call_id": pendingIDs(done)[0], "output": "ok"}}})
	var order []string
	for len(order) < 2 {
		f := c.Next()
		l := f.Str("stream_id")
		if l == "" {
			t.Fatalf("event without its lane: %v", f)
		}
		byLane[l] = append(byLane[l], f)
		if f.Type() == "response.completed" {
			order = append(order, l)
		}
	}
	if strings.Join(order, ",") != "tools,slow" {
		t.Fatalf("completion order %v: the slow lane held the tool lane back", order)
	}
	for l, fs := range byLane {
		if l != "" {
			checkGrammar(t, fs)
		}
	}
	r := rollout(t, c, create("default lane", nil), nil)
	for _, f := range r {
		if _, has := f["stream_id"]; has {
			t.Fatalf("default-lane event with a stream_id: %v", f)
		}
	}
}
