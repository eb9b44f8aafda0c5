package conformance

// The scenarios of the append shape only (docs/append-protocol.md).

import (
	"net/http"
	"slices"
	"strings"
)

// optIn: the append opt-in is a token of the OpenAI-Beta list (or the query
// protocol=append.v1), confirmed on the 101; a connection without it speaks the public shape.
func optIn(t *T) {
	p := t.dialShape(shapeAppend, http.Header{"Openai-Beta": {"responses_websockets=2026-02-06, " + appendBeta}}, "")
	p.stillUsable()
	if t.sim("Tether also accepts the opt-in as the query protocol=append.v1") {
		t.dialShape(shapeAppend, http.Header{}, "protocol=append.v1").stillUsable()
	}
	pub := t.dialShape(shapePublic, nil, "")
	pub.send(M{"type": "response.append", "response_id": "resp_conformance", "input": []any{}})
	pub.expectError(400, "unknown_event_type", "type")
}

// rejectedThenGoodAppend: appends that leave a call without output, answer a call twice,
// name an unknown call or put items out of order are rejected with one error frame each and
// change nothing; the right outputs, in any order, then resume the rollout where it stopped.
func rejectedThenGoodAppend(t *T) {
	p := t.dial()
	tu := p.start(t.create("Weather and time in Paris?", M{"tools": []any{weatherTool, clockTool}, "metadata": meta("sim.parallel", "2", "sim.calls", "2")}))
	calls := t.needCalls(tu)
	if t.sim("two parallel calls (metadata sim.parallel)") {
		t.check(len(calls) == 2, "want 2 parallel calls, got %d", len(calls))
	}
	good := outputs(calls, 0, toolResult)
	if len(calls) > 1 {
		e := p.resumeRejected(tu, good[:1], 400, "missing_tool_output", "input")
		t.check(strings.Contains(e.Str("error", "message"), calls[1].Str("call_id")),
			"missing_tool_output does not name the call left without output (%s): %q", calls[1].Str("call_id"), e.Str("error", "message"))
	}
	p.resumeRejected(tu, []any{}, 400, "missing_tool_output", "input")
	p.resumeRejected(tu, append(slices.Clone(good), good[0]), 400, "duplicate_tool_output", "input")
	p.resumeRejected(tu, append([]any{toolOutput("call_conformance_unknown", "x")}, good...), 400, "tool_call_not_found", "input")
	p.resumeRejected(tu, append([]any{userMessage("First this.")}, good...), 400, "invalid_value", "input[1]")
	p.resumeRejected(tu, append([]any{M{"type": "function_call", "call_id": "call_conformance_x", "name": "get_time", "arguments": "{}"}}, good...),
		400, "invalid_value", "input[0].type")
	rev := slices.Clone(good)
	slices.Reverse(rev)
	next := p.resume(tu, rev)
	if !next.Ended() { // a second stop: an output for a call answered before is not pending
		e := p.resumeRejected(next, append(outputs(next.Calls(), len(calls), toolResult), good[0]), 400, "tool_call_not_found", "input")
		t.check(strings.Contains(e.Str("error", "message"), calls[0].Str("call_id")), "tool_call_not_found does not name %s: %q", calls[0].Str("call_id"), e.Str("error", "message"))
	}
	r := p.drive(next, func(c Frame, i int) string { return toolResult(c, i+len(calls)) })
	t.checkCompleted(r.Last())
	if t.sim("the answer quotes every output") {
		var quoted []string
		for _, o := range good {
			quoted = append(quoted, o.(M)["output"].(string))
		}
		t.checkQuotes(r.Text(), quoted...)
	}
}

// cancelSuspended: response.cancel ends a suspended rollout with response.incomplete
// (reason cancelled); it can then be neither cancelled nor appended to, and a new rollout
// continuing it by previous_response_id must answer its calls.
func cancelSuspended(t *T) {
	p := t.dial()
	const q = "Run the tests."
	tu := p.start(t.create(q, M{"tools": []any{shellTool}}))
	calls := t.needCalls(tu)
	p.send(M{"type": "response.cancel", "response_id": tu.ID})
	p.expectEvent("response.incomplete", M{"response": M{"id": tu.ID, "incomplete_details": M{"reason": "cancelled"}}})
	p.send(M{"type": "response.cancel", "response_id": tu.ID})
	p.expectError(409, "response_already_completed", "response_id")
	p.send(p.continuation(tu, outputs(calls, 0, toolResult)))
	p.expectError(409, "response_not_suspended", "response_id")
	p.send(t.create([]any{userMessage("Go on.")}, M{"previous_response_id": tu.ID, "tools": []any{shellTool}}))
	p.expectError(400, "missing_tool_output", "input")
	r := p.drive(p.start(t.create(outputs(calls, 0, toolResult), M{"previous_response_id": tu.ID, "tools": []any{shellTool}})), nil)
	t.checkCompleted(r.Last())
	if t.sim("the new rollout's answer quotes the cancelled rollout's input and the outputs") {
		t.checkQuotes(r.Text(), q, toolResult(calls[0], 0))
	}
}

// cancelSampling: response.cancel of a sampling rollout closes the open item (status
// incomplete) and ends the rollout with response.incomplete (reason cancelled).
func cancelSampling(t *T) {
	p := t.dial()
	p.send(t.create("Tell me a long story.", M{"metadata": meta("sim.speed", "1000", "sim.answer_tokens", "4000")}))
	id := p.expectEvent("response.created", nil).Str("response", "id")
	p.until("the first output_text.delta", func(f Frame) bool {
		return f.Type() == "response.output_text.delta" || isTerminal(f.Type())
	})
	p.send(M{"type": "response.cancel", "response_id": id})
	fs := p.until("the terminal event of "+id, func(f Frame) bool { return isTerminal(f.Type()) })
	end := fs[len(fs)-1]
	if end.Type() == "response.completed" && !t.sim("the sim's slow preset is still sampling when the cancel arrives") {
		p.expectError(409, "response_already_completed", "response_id")
		return
	}
	if !contains(end, M{"type": "response.incomplete", "response": M{"incomplete_details": M{"reason": "cancelled"}}}) {
		t.fail(&Failure{Message: "the cancelled rollout did not end as cancelled", Expected: `response.incomplete {"incomplete_details":{"reason":"cancelled"}}`, Received: end.String(), Frames: p.recent()})
	}
	out := items(end.List("response", "output"))
	t.check(len(out) == 1 && out[0].Str("status") == "incomplete", "the item cut by the cancel has status %q, want incomplete", out[0].Str("status"))
	p.stillUsable()
}

// cancelQueuedAppend: a rollout whose append was accepted but waits for the sampling slot can
// be cancelled: it ends with response.incomplete (reason cancelled) without new output.
func cancelQueuedAppend(t *T) {
	p := t.dial()
	a := p.start(t.create("The first task.", M{"tools": []any{shellTool}}))
	calls := t.needCalls(a)
	p.send(t.create("Tell me a long story.", M{"metadata": meta("sim.speed", "1000", "sim.answer_tokens", "4000")}))
	b := p.expectEvent("response.created", nil).Str("response", "id")
	p.until("the first output_text.delta of "+b, func(f Frame) bool { return f.Type() == "response.output_text.delta" })
	p.send(p.continuation(a, outputs(calls, 0, toolResult))) // accepted: it waits behind b
	p.g.resumed(a.ID)
	p.send(M{"type": "response.cancel", "response_id": a.ID})
	p.send(M{"type": "response.cancel", "response_id": b})
	ends := map[string]Frame{}
	p.until("the terminal events of both rollouts", func(f Frame) bool {
		if isTerminal(f.Type()) {
			ends[f.Str("response", "id")] = f
		}
		return ends[a.ID] != nil && ends[b] != nil
	})
	want := M{"type": "response.incomplete", "response": M{"incomplete_details": M{"reason": "cancelled"}, "output": a.Stop.Get("output")}}
	if !contains(ends[a.ID], want) {
		t.fail(&Failure{Message: "the cancelled rollout, whose append waited for the slot", Expected: compact(want), Received: ends[a.ID].String(), Frames: p.recent()})
	}
	p.stillUsable()
}

// twoRollouts: while one rollout is suspended, another runs to completion on the same
// connection; then the first resumes, with its own context.
func twoRollouts(t *T) {
	p := t.dial()
	const qa, qb = "The first task.", "The second task."
	a := p.start(t.create(qa, M{"tools": []any{shellTool}}))
	calls := t.needCalls(a)
	b := p.rollout(t.create(qb, nil), nil)
	t.checkCompleted(b.Last())
	t.check(b.Last().ID != a.ID, "the second rollout has the first's id")
	ra := p.drive(p.resume(a, outputs(calls, 0, toolResult)), nil)
	t.checkCompleted(ra.Last())
	if t.sim("each answer quotes its own rollout's input only") {
		t.checkQuotes(ra.Text(), qa)
		t.checkQuotes(b.Text(), qb)
		t.check(!strings.Contains(ra.Text(), qb) && !strings.Contains(b.Text(), qa), "the rollouts' contexts are mixed")
	}
}
