package compat_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// realtime is a server whose sim takes the time its speed says (sim.speed is honoured).
func realtime(o server.Options) server.Options {
	o.Model = sim.NewSim(sim.SimOptions{Realtime: true})
	return o
}

// slow makes the sim take about tokens/65 seconds to answer.
func slow(tokens string) map[string]string {
	return map[string]string{"sim.speed": "65", "sim.answer_tokens": tokens}
}

// inLane returns a create on lane id.
func inLane(id string, input any, extra map[string]any) map[string]any {
	m := create(input, extra)
	m["stream_id"] = id
	return m
}

// TestLanesSampleConcurrently: a slow response on one lane does not delay another lane; every
// event carries its lane's stream_id, the default lane's none.
func TestLanesSampleConcurrently(t *testing.T) {
	f := newFixture(t, realtime(server.Options{}))
	c := f.dial(t)
	c.Send(inLane("slow", "take your time", map[string]any{"metadata": slow("120")}))
	c.Send(inLane("fast", "quick", nil))
	c.Send(create("default lane", nil))
	var order []string
	lanes := map[string][]wstest.Frame{}
	for len(order) < 3 {
		fr := c.Next()
		l := fr.Str("stream_id")
		lanes[l] = append(lanes[l], fr)
		if fr.Type() == "response.completed" {
			order = append(order, l)
		}
	}
	if order[2] != "slow" {
		t.Fatalf("completion order %q: the slow lane held the others back", order)
	}
	for l, fs := range lanes {
		wstest.CheckGrammar(t, conformance.ShapePublic, fs)
		for _, fr := range fs {
			if _, has := fr["stream_id"]; has != (l != "") {
				t.Fatalf("lane %q: event %s stream_id presence wrong: %v", l, fr.Type(), fr)
			}
		}
	}
}

// TestLaneIsFIFO: two creates on one lane never overlap; the second starts after the first ends.
func TestLaneIsFIFO(t *testing.T) {
	f := newFixture(t, realtime(server.Options{}))
	c := f.dial(t)
	c.Send(inLane("a", "first", map[string]any{"metadata": slow("20")}))
	c.Send(inLane("a", "second", nil))
	var types []string
	for done := 0; done < 2; {
		fr := c.Next()
		if fr.Str("stream_id") != "a" {
			t.Fatalf("event without its lane: %v", fr)
		}
		types = append(types, fr.Type())
		if fr.Type() == "response.completed" {
			done++
		}
	}
	first := strings.Index(strings.Join(types, " "), "response.completed")
	second := strings.LastIndex(strings.Join(types, " "), "response.created")
	if second < first {
		t.Fatalf("the lane's second response began before its first ended: %v", types)
	}
}

// TestLaneErrors: invalid names get invalid_stream_id without a stream_id; the lane after the
// limit gets websocket_stream_limit_reached echoing its name; names already used, and the
// default lane, still work; request-scoped errors carry their lane.
func TestLaneErrors(t *testing.T) {
	f := newFixture(t, server.Options{Limits: session.Limits{MaxLanes: 2}})
	c := f.dial(t)
	for _, bad := range []string{"", "a b", strings.Repeat("x", 257), "é"} {
		c.Send(inLane(bad, "x", nil))
		e := c.ExpectError(400, "invalid_stream_id", "stream_id")
		if _, has := e["stream_id"]; has {
			t.Fatalf("invalid_stream_id attributed to a lane: %v", e)
		}
	}
	turn(t, c, inLane("x", "one", nil))
	turn(t, c, inLane(strings.Repeat("y", 256), "two", nil))
	c.Send(inLane("z", "three", nil))
	if e := c.ExpectError(400, "websocket_stream_limit_reached", "stream_id"); e.Str("stream_id") != "z" {
		t.Fatalf("limit error not attributed to the rejected lane: %v", e)
	}
	turn(t, c, inLane("x", "reuse", nil))
	turn(t, c, create("default", nil))
	// Errors of a create that fails its checks or does not decode carry its lane too.
	c.Send(inLane("x", "bg", map[string]any{"background": true}))
	if e := c.ExpectError(400, "unsupported_parameter", "background"); e.Str("stream_id") != "x" {
		t.Fatalf("unsupported_parameter without its lane: %v", e)
	}
	c.Send(map[string]any{"type": "response.create", "stream_id": "x", "input": "no model"})
	if e := c.ExpectError(400, "missing_required_parameter", "model"); e.Str("stream_id") != "x" {
		t.Fatalf("a decoding error without its lane: %v", e)
	}
	c.Send(inLane("x", "cont", map[string]any{"previous_response_id": "resp_missing"}))
	if e := c.ExpectError(400, "previous_response_not_found", "previous_response_id"); e.Str("stream_id") != "x" {
		t.Fatalf("request-scoped error without its lane: %v", e)
	}
}

// TestNoLaneCap: a negative MaxLanes (tether serve -max-lanes 0) bounds nothing.
func TestNoLaneCap(t *testing.T) {
	f := newFixture(t, server.Options{Limits: session.Limits{MaxLanes: -1, MaxInflight: -1}})
	c := f.dial(t)
	for i := range 40 {
		turn(t, c, inLane(fmt.Sprintf("l%d", i), "hi", nil))
	}
}

// TestLaneFork: a response of lane a continued from lane b (a fork) runs cold with a copy of
// the chain; lane a still continues its suspended rollout hot; both answer from the same parent.
func TestLaneFork(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	tools := map[string]any{"store": false, "tools": []any{shell}, "metadata": map[string]string{"sim.calls": "1"}}
	p := turn(t, c, inLane("a", "start", tools))
	ids := callIDs(p)
	if len(ids) != 1 {
		t.Fatalf("want one call, got %v", ids)
	}
	cont := func(lane string) map[string]any {
		m := inLane(lane, []any{toolOutput(ids[0], "ok")}, tools)
		m["previous_response_id"] = respID(p)
		return m
	}
	hot0, cold0 := f.srv.Counters().Hot.Load(), f.srv.Counters().Cold.Load()
	fork := turn(t, c, cont("b"))
	same := turn(t, c, cont("a"))
	if final(fork).Type() != "response.completed" || final(same).Type() != "response.completed" {
		t.Fatalf("fork %s, same lane %s", final(fork).Type(), final(same).Type())
	}
	if fingerprint(t, fork) != fingerprint(t, same) {
		t.Fatalf("fork and same-lane continuation saw different contexts: %s vs %s", fingerprint(t, fork), fingerprint(t, same))
	}
	if hot, cold := f.srv.Counters().Hot.Load()-hot0, f.srv.Counters().Cold.Load()-cold0; hot != 1 || cold != 1 {
		t.Fatalf("hot %d cold %d, want the same lane hot and the fork cold", hot, cold)
	}
}

// TestFailedForkKeepsParent: a fork that fails leaves its parent in place; a
// failed same-lane continuation evicts it.
func TestFailedForkKeepsParent(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	tools := map[string]any{"store": false, "tools": []any{shell}, "metadata": map[string]string{"sim.calls": "1"}}
	p := turn(t, c, inLane("a", "start", tools))
	bad := inLane("b", []any{toolOutput("call_nope", "x")}, tools)
	bad["previous_response_id"] = respID(p)
	c.Send(bad)
	if e := c.ExpectError(400, "tool_call_not_found", "input"); e.Str("stream_id") != "b" {
		t.Fatalf("fork error without its lane: %v", e)
	}
	good := inLane("a", []any{toolOutput(callIDs(p)[0], "ok")}, tools)
	good["previous_response_id"] = respID(p)
	if r := turn(t, c, good); final(r).Type() != "response.completed" {
		t.Fatalf("parent lost after a failed fork: %s", final(r).Type())
	}
	bad["stream_id"] = "a"
	c.Send(bad)
	c.ExpectError(400, "tool_call_not_found", "input")
	c.Send(good)
	c.ExpectError(400, "previous_response_not_found", "previous_response_id")
}

// TestMaxInflight: with -max-inflight 1 two lanes take turns (the second lane's response
// begins only once the first has sampled its answer); neither is refused.
func TestMaxInflight(t *testing.T) {
	f := newFixture(t, realtime(server.Options{Limits: session.Limits{MaxInflight: 1}}))
	c := f.dial(t)
	c.Send(inLane("a", "first", map[string]any{"metadata": slow("20")}))
	c.Send(inLane("b", "second", nil))
	var seen []string
	for done := 0; done < 2; {
		fr := c.Next()
		seen = append(seen, fr.Str("stream_id")+" "+fr.Type())
		if fr.Type() == "response.completed" {
			done++
		}
	}
	// Either lane may take the slot first; the other must not sample until it is done.
	first, second := "a", "b"
	if strings.HasPrefix(seen[0], "b ") {
		first, second = "b", "a"
	}
	all := strings.Join(seen, "\n")
	if strings.Index(all, second+" response.created") < strings.LastIndex(all, first+" response.output_text.delta") {
		t.Fatalf("lane %s sampled while lane %s held the only in-flight slot:\n%s", second, first, all)
	}
}
