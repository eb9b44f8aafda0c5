package conformance

// The scenarios of lanes (stream_id): a named lane is
// its own FIFO, lanes run concurrently, every event and request-scoped error of a lane carries
// its stream_id, the default lane's none.

import (
	"fmt"
	"strings"
)

// slowMeta makes the sim sample its answer slowly (about two seconds in real time).
func slowMeta() M { return meta("sim.speed", "1000", "sim.answer_tokens", "2000") }

// concurrentLanes reports whether the check that lanes sample concurrently is made: under
// the sim contract, unless Config.SerialLanes (then it is listed as a skipped check).
func (t *T) concurrentLanes(check string) bool {
	if t.cfg.SerialLanes {
		t.skipped = append(t.skipped, check+" (skipped: -serial-lanes)")
		return false
	}
	return t.sim(check)
}

// laneEnd reads, within lane, up to and including the terminal event of the lane's response
// (both shapes: a response without tools ends with it).
func (p *Peer) laneEnd(lane string) []Frame {
	var fs []Frame
	p.inLane(lane, func() {
		fs = p.until("the terminal event on lane "+lane, func(f Frame) bool { return isTerminal(f.Type()) })
	})
	return fs
}

// checkAttributed fails unless every frame carries stream_id lane ("" for none).
func (t *T) checkAttributed(lane string, fs []Frame) {
	for _, f := range fs {
		got, has := f["stream_id"]
		if (lane == "" && has) || (lane != "" && got != lane) {
			want := fmt.Sprintf("stream_id %q", lane)
			if lane == "" {
				want = "no stream_id (the default lane)"
			}
			t.fail(&Failure{Message: "an event not attributed to its lane", Expected: want, Received: clip(f.String(), 600)})
		}
	}
}

// lanesConcurrency: a slow response on lane a and a short one on lane b sent after it: b ends
// first, each lane's events carry its stream_id.
func lanesConcurrency(t *T) {
	p := t.dial()
	p.send(inLane("a", t.create("Tell me a long story.", M{"metadata": slowMeta()})))
	p.inLane("a", func() { p.expectEvent("response.created", M{"stream_id": "a"}) })
	p.send(inLane("b", t.create("Say hi.", nil)))
	b := p.laneEnd("b")
	t.checkCompleted(&Turn{Stop: b[len(b)-1]})
	if t.concurrentLanes("a slow sim response (metadata sim.speed) is still sampling when a short one ends") {
		t.check(!p.heldTerminal("a"), "lane a's slow response ended before lane b's short one: lanes do not sample concurrently")
	}
	a := p.laneEnd("a")
	t.checkAttributed("a", a)
	t.checkAttributed("b", b)
}

// lanesFIFO: two creates on one lane never overlap: the second's response.created comes after
// the first's terminal event (the lane's grammar fails on interleaving).
func lanesFIFO(t *T) {
	p := t.dial()
	p.send(inLane("a", t.create("The first request.", M{"metadata": meta("sim.speed", "1000", "sim.answer_tokens", "300")})))
	p.send(inLane("a", t.create("The second request.", nil)))
	var fs []Frame
	p.inLane("a", func() {
		ends := 0
		fs = p.until("two terminal events on lane a", func(f Frame) bool {
			if isTerminal(f.Type()) {
				ends++
			}
			return ends == 2
		})
	})
	var order []string
	for _, f := range fs {
		if f.Type() == "response.created" || isTerminal(f.Type()) {
			order = append(order, f.Type())
		}
	}
	t.check(len(order) == 4 && order[0] == "response.created" && order[2] == "response.created" && isTerminal(order[1]),
		"the lane's responses overlap: %v", order)
	t.checkAttributed("a", fs)
}

// lanesAttribution: every event of a lane's tool rollout carries its stream_id, terminal
// events too; the default lane's events none; a request-scoped error of a lane carries it.
func lanesAttribution(t *T) {
	p := t.dial()
	var r *Rollout
	p.inLane("x", func() { r = p.rollout(inLane("x", t.create("Run the tests.", M{"tools": []any{shellTool}})), nil) })
	t.checkCompleted(r.Last())
	for _, tu := range r.Turns {
		t.checkAttributed("x", tu.Frames)
	}
	d := p.start(t.create("Hello.", nil))
	t.checkCompleted(d)
	t.checkAttributed("", d.Frames)
	p.send(inLane("x", t.create("Go on.", M{"previous_response_id": "resp_conformance_missing"})))
	e := p.expectError(400, "previous_response_not_found", "previous_response_id")
	t.check(e.Str("stream_id") == "x", "a request-scoped error of lane x without its stream_id: %s", e.String())
	p.send(t.create("Go on.", M{"previous_response_id": "resp_conformance_missing"}))
	e = p.expectError(400, "previous_response_not_found", "previous_response_id")
	t.check(!e.Has("stream_id"), "a default-lane error carries a stream_id: %s", e.String())
}

// lanesInvalidStreamID: an empty name, one with a space and one of 257 characters are
// invalid_stream_id, with no stream_id on the envelope; the connection stays usable.
func lanesInvalidStreamID(t *T) {
	p := t.dial()
	for _, bad := range []string{"", "a b", strings.Repeat("x", 257)} {
		p.send(inLane(bad, t.create("hi", nil)))
		e := p.expectError(400, "invalid_stream_id", "stream_id")
		t.check(!e.Has("stream_id"), "invalid_stream_id is attributed to a lane: %s", e.String())
	}
	p.stillUsable()
}

// lanesLimit: 32 distinct named lanes (OpenAI's limit) serve; a 33rd is
// websocket_stream_limit_reached echoing its stream_id; a used name and the default lane still
// serve.
func lanesLimit(t *T) {
	const limit = 32
	p := t.dial()
	name := func(i int) string { return fmt.Sprintf("lane-%02d", i) }
	for i := range limit {
		var tu *Turn
		p.inLane(name(i), func() { tu = p.start(inLane(name(i), t.create("Say hi.", nil))) })
		t.checkCompleted(tu)
	}
	p.send(inLane("lane-over", t.create("Say hi.", nil)))
	e := p.expectError(400, "websocket_stream_limit_reached", "stream_id")
	t.check(e.Str("stream_id") == "lane-over", "websocket_stream_limit_reached does not echo the rejected stream_id: %s", e.String())
	var tu *Turn
	p.inLane(name(7), func() { tu = p.start(inLane(name(7), t.create("Again.", nil))) })
	t.checkCompleted(tu)
	t.checkAttributed(name(7), tu.Frames)
	p.stillUsable()
}

// lanesFork: a response of lane a stops at a tool call; lane b continues it (a fork), then lane
// a continues it too: both complete from the same parent, each in its own lane.
func lanesFork(t *T) {
	p := t.dial()
	var parent, fork, same *Turn
	p.inLane("a", func() {
		parent = p.start(inLane("a", t.create("Check the disk usage.", M{"store": false, "tools": []any{shellTool}})))
	})
	in := outputs(t.needCalls(parent), 0, toolResult)
	p.inLane("b", func() {
		c := inLane("b", p.continuation(parent, in))
		p.send(c)
		fork = p.await(c)
	})
	p.inLane("a", func() { same = p.resume(parent, in) })
	t.checkCompleted(fork)
	t.checkCompleted(same)
	t.checkAttributed("b", fork.Frames)
	t.checkAttributed("a", same.Frames)
	t.check(fork.Response().Str("previous_response_id") == parent.ID && same.Response().Str("previous_response_id") == parent.ID,
		"the fork and the same-lane continuation do not both continue %s", parent.ID)
	if t.sim("the fork and the same-lane continuation see the same context (fingerprint)") {
		t.check(fingerprint(fork.Text()) != "" && fingerprint(fork.Text()) == fingerprint(same.Text()),
			"the fork saw another context: %s vs %s", fingerprint(fork.Text()), fingerprint(same.Text()))
	}
}

// lanesFailedForkKeepsParent: a fork (lane b) that fails leaves its store:false parent in
// place, and lane a continues it; a failed same-lane continuation then evicts it.
func lanesFailedForkKeepsParent(t *T) {
	p := t.dial()
	var parent *Turn
	p.inLane("a", func() {
		parent = p.start(inLane("a", t.create("Check the disk usage.", M{"store": false, "tools": []any{shellTool}})))
	})
	calls := t.needCalls(parent)
	bad := p.continuation(parent, []any{toolOutput("call_conformance_unknown", "x")})
	p.send(inLane("b", bad))
	e := p.expectError(400, "tool_call_not_found", "input")
	t.check(e.Str("stream_id") == "b", "the failed fork's error does not carry its lane: %s", e.String())
	var next *Turn
	p.inLane("a", func() { next = p.resume(parent, outputs(calls, 0, toolResult)) })
	t.checkCompleted(next)
	p.send(p.continuation(next, []any{toolOutput("call_conformance_unknown", "x")}))
	p.expectError(400, "tool_call_not_found", "input")
	p.send(p.continuation(next, []any{userMessage("Go on.")}))
	p.expectError(400, "previous_response_not_found", "previous_response_id")
}

// lanesStalledLane: while lane slow samples a long answer, a whole tool rollout on lane b runs
// to its answer; lane slow then ends normally.
func lanesStalledLane(t *T) {
	p := t.dial()
	p.send(inLane("slow", t.create("Tell me a long story.", M{"metadata": slowMeta()})))
	p.inLane("slow", func() {
		p.until("the first output_text.delta on lane slow", func(f Frame) bool {
			return f.Type() == "response.output_text.delta" || isTerminal(f.Type())
		})
	})
	var r *Rollout
	p.inLane("b", func() { r = p.rollout(inLane("b", t.create("Run the tests.", M{"tools": []any{shellTool}})), nil) })
	t.checkCompleted(r.Last())
	if t.concurrentLanes("a slow sim response (metadata sim.speed) is still sampling when the other lane's rollout ends") {
		t.check(!p.heldTerminal("slow"), "the slow lane ended before the other lane's rollout: a lane waited for another")
	}
	end := p.laneEnd("slow")
	t.checkCompleted(&Turn{Stop: end[len(end)-1]})
	t.checkAttributed("slow", end)
}
