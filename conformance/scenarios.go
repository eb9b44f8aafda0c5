package conformance

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// scenario is one case of the suite. Its body is written once and runs against any server,
// in every shape it is marked for.
type scenario struct {
	name string
	// shapes is "public" or "append" (that shape only), "both" (once per shape) or
	// "cross" (once, through both shapes: shape equivalence, and what one shape stored read
	// through the other). A cross scenario's name carries its group ("equivalence/tools-5").
	shapes string
	// sim, if set, says what of Tether and its sim model the scenario relies on; it is skipped
	// with that reason under -model-contract any.
	sim string
	// maxFrame marks a scenario that needs the server's frame limit (Config.MaxFrame, or
	// the one the server names): it is skipped, saying why, when that is unknown.
	maxFrame bool
	run      func(t *T)
}

const (
	onPublic = "public"
	onAppend = "append"
	onBoth   = "both"
	onCross  = "cross"
)

// instances are the shapes the scenario runs in under the configured shape.
func (sc *scenario) instances(shape string) []string {
	switch sc.shapes {
	case onPublic:
		if shape != ShapeAppend {
			return []string{shapePublic}
		}
	case onAppend:
		if shape != ShapePublic {
			return []string{shapeAppend}
		}
	case onBoth:
		switch shape {
		case ShapePublic:
			return []string{shapePublic}
		case ShapeAppend:
			return []string{shapeAppend}
		}
		return []string{shapePublic, shapeAppend}
	case onCross:
		if shape == ShapeBoth {
			return []string{ShapeBoth}
		}
	}
	return nil
}

func (sc *scenario) fullName(shape string) string {
	if shape == ShapeBoth {
		return sc.name
	}
	return shape + "/" + sc.name
}

// Scenarios lists the scenario names per shape, in run order ("public/text-turn", …,
// "equivalence/tools-5"), for the given Config.Shape.
func Scenarios(shape string) []string {
	if shape == "" {
		shape = ShapeBoth
	}
	var names []string
	for _, sc := range scenarios {
		for _, s := range sc.instances(shape) {
			names = append(names, sc.fullName(s))
		}
	}
	return names
}

// scenarios is the suite, in run order.
var scenarios = []*scenario{
	// Rollouts, in both shapes.
	{name: "text-turn", shapes: onBoth, run: textTurn},
	{name: "tools-1", shapes: onBoth, run: toolCalls(1)},
	{name: "tools-5", shapes: onBoth, sim: "exact sequential call counts (metadata sim.calls)", run: toolCalls(5)},
	{name: "tools-20", shapes: onBoth, sim: "exact sequential call counts (metadata sim.calls)", run: toolCalls(20)},
	{name: "parallel-calls", shapes: onBoth, sim: "parallel calls on demand (metadata sim.parallel)", run: parallelCalls},
	{name: "tool-outputs-then-message", shapes: onBoth, run: toolOutputsThenMessage},
	{name: "tool-choice", shapes: onBoth, run: toolChoice},
	{name: "continuation", shapes: onBoth, run: continuation},
	{name: "settings-echo", shapes: onBoth, run: settingsEcho},
	{name: "queued-creates", shapes: onBoth, run: queuedCreates},
	{name: "store-new-connection", shapes: onBoth, run: storeNewConnection},
	{name: "store-http", shapes: onBoth, run: storeOverHTTP},
	{name: "max-output-tokens", shapes: onBoth, run: maxOutputTokens},
	{name: "model-failure", shapes: onBoth, sim: "failure injection (metadata sim.fail)", run: modelFailure},
	{name: "ignored-fields", shapes: onBoth, run: ignoredFields},
	{name: "continuation-answered-once", shapes: onBoth, run: continuationAnsweredOnce},

	// The public shape only.
	{name: "warm-up", shapes: onPublic, run: warmUp},
	{name: "hot-and-cold", shapes: onPublic, sim: "cached_tokens of the hot and cold path and the context fingerprint", run: hotAndCold},
	{name: "http-json-rollout", shapes: onPublic, run: httpRollout(false)},
	{name: "http-sse-rollout", shapes: onPublic, run: httpRollout(true)},
	{name: "background", shapes: onPublic, run: background},
	{name: "steer", shapes: onPublic, run: steer},
	{name: "steer/interrupt", shapes: onPublic, sim: "a long, slow answer to steer (metadata sim.speed) and a model that steers", run: steerInterrupt},
	{name: "steer/failures", shapes: onPublic, run: steerFailures},

	// The append shape only.
	{name: "opt-in", shapes: onAppend, run: optIn},
	{name: "rejected-then-good-append", shapes: onAppend, run: rejectedThenGoodAppend},
	{name: "cancel-suspended", shapes: onAppend, run: cancelSuspended},
	{name: "cancel-sampling", shapes: onAppend, run: cancelSampling},
	{name: "cancel-queued-append", shapes: onAppend, sim: "a slow sampling rollout holds the slot (metadata sim.speed)", run: cancelQueuedAppend},
	{name: "two-rollouts", shapes: onAppend, run: twoRollouts},

	// Lanes (stream_id).
	{name: "lanes/concurrency", shapes: onBoth, run: lanesConcurrency},
	{name: "lanes/fifo", shapes: onBoth, run: lanesFIFO},
	{name: "lanes/attribution", shapes: onBoth, run: lanesAttribution},
	{name: "lanes/invalid-stream-id", shapes: onBoth, run: lanesInvalidStreamID},
	{name: "lanes/limit", shapes: onBoth, run: lanesLimit},
	{name: "lanes/fork", shapes: onPublic, run: lanesFork},
	{name: "lanes/failed-fork-keeps-parent", shapes: onPublic, run: lanesFailedForkKeepsParent},
	{name: "lanes/stalled-lane", shapes: onBoth, run: lanesStalledLane},

	// Errors.
	{name: "error/invalid-json", shapes: onBoth, run: errInvalidJSON},
	{name: "error/missing-type", shapes: onBoth, run: errMissingType},
	{name: "error/unknown-event-type", shapes: onBoth, run: errUnknownEventType},
	{name: "error/missing-parameter", shapes: onBoth, run: errMissingParameter},
	{name: "error/invalid-type", shapes: onBoth, run: errInvalidType},
	{name: "error/invalid-value", shapes: onBoth, run: errInvalidValue},
	{name: "error/unsupported-parameter", shapes: onBoth, run: errUnsupportedParameter},
	{name: "error/unknown-parameter", shapes: onBoth, run: errUnknownParameter},
	{name: "error/out-of-range", shapes: onBoth, run: errOutOfRange},
	{name: "error/binary-frame", shapes: onBoth, run: errBinaryFrame},
	{name: "error/oversize-frame", shapes: onBoth, maxFrame: true, run: errOversizeFrame},
	{name: "error/queue-full", shapes: onBoth, sim: "a slow sampling response holds the slot (metadata sim.speed)", run: errQueueFull},
	{name: "error/unknown-parent", shapes: onBoth, run: errUnknownParent},
	{name: "error/cross-connection-parent", shapes: onBoth, run: errCrossConnection},
	{name: "error/tool-call-not-found", shapes: onBoth, run: errToolCallNotFound},
	{name: "error/missing-tool-output", shapes: onBoth, run: errMissingToolOutput},
	{name: "error/duplicate-tool-output", shapes: onBoth, run: errDuplicateToolOutput},
	{name: "error/evicted-parent", shapes: onPublic, run: errEvictedParent},
	{name: "error/evicted-parent-after-failure", shapes: onPublic, sim: "failure injection (metadata sim.fail)", run: errEvictedAfterFailure},
	{name: "error/http", shapes: onPublic, run: errHTTP},
	{name: "error/oversize-body", shapes: onPublic, maxFrame: true, run: errOversizeBody},
	{name: "compact", shapes: onPublic, run: compactWindow},
	{name: "error/response-not-found", shapes: onAppend, run: errResponseNotFound},
	{name: "error/response-not-suspended", shapes: onAppend, sim: "a slow sampling rollout (metadata sim.speed)", run: errResponseNotSuspended},
	{name: "error/response-in-progress", shapes: onAppend, run: errResponseInProgress},

	// The same rollout through both shapes.
	{name: "equivalence/text-turn", shapes: onCross, sim: "deterministic output and context fingerprints", run: equivalent(func(t *T) M {
		return t.create("Explain the plan in one line.", nil)
	})},
	{name: "equivalence/tools-5", shapes: onCross, sim: "deterministic output and context fingerprints", run: equivalent(func(t *T) M {
		return t.create("Fix the failing build.", M{"tools": []any{shellTool}, "metadata": meta("sim.calls", "5")})
	})},
	{name: "equivalence/parallel-calls", shapes: onCross, sim: "deterministic output and context fingerprints", run: equivalent(func(t *T) M {
		return t.create("Weather and time in Paris and Rome?", M{"tools": []any{weatherTool, clockTool}, "metadata": meta("sim.parallel", "2", "sim.calls", "2"),
			"instructions": "Answer briefly."})
	})},
	{name: "equivalence/continuation", shapes: onCross, sim: "deterministic output and context fingerprints", run: equivalentContinuation},
	{name: "cross-shape/store", shapes: onCross, run: crossShapeStore},
}

// stillUsable checks that the connection still serves a response.
func (p *Peer) stillUsable() {
	tu := p.start(p.t.create("Still there?", nil))
	p.t.check(tu.Ended() && tu.Status() == "completed", "the connection does not serve a response any more: %s", tu.Stop.Type())
}

// checkUsage checks a terminal Response's usage: input and output tokens
// counted, total their sum, cached tokens at most the input.
func (t *T) checkUsage(tu *Turn) {
	in, out, total := tu.Usage("input_tokens"), tu.Usage("output_tokens"), tu.Usage("total_tokens")
	cached := tu.Usage("input_tokens_details", "cached_tokens")
	t.check(in > 0 && out > 0 && total == in+out && cached >= 0 && cached <= in,
		"implausible usage: %s", compact(tu.Response().Get("usage")))
}

func (t *T) checkCompleted(tu *Turn) {
	if !tu.Ended() || tu.Status() != "completed" {
		t.fail(&Failure{Message: "the response did not complete", Expected: "response.completed", Received: tu.Stop.String()})
	}
}

// textTurn: one user message, no tools: one assistant message, then response.completed.
func textTurn(t *T) {
	p := t.dial()
	const q = "Say hello to the conformance suite."
	tu := p.start(t.create(q, nil))
	t.checkCompleted(tu)
	t.check(len(tu.Items) == 1 && tu.Items[0].Type() == "message" && tu.Items[0].Str("role") == "assistant",
		"want one assistant message, got %s", compact(tu.Items))
	t.check(tu.Text() != "", "the answer is empty")
	t.checkUsage(tu)
	if t.sim("the answer quotes the input and ends with a context fingerprint") {
		t.checkQuotes(tu.Text(), q)
	}
}

// toolCalls: an agent loop with n sequential tool calls: at each stop the client answers the
// call and the rollout continues (public: a new response chained by previous_response_id;
// append: response.append to the same response), then the model answers.
func toolCalls(n int) func(*T) {
	return func(t *T) {
		p := t.dial()
		const q = "Fix the failing build."
		r := p.rollout(t.create(q, M{"tools": []any{shellTool}, "metadata": meta("sim.calls", strconv.Itoa(n))}), nil)
		last := r.Last()
		t.checkCompleted(last)
		t.checkUsage(last)
		if !t.sim(fmt.Sprintf("exactly %d sequential calls with echo commands; the answer quotes every output", n)) {
			return
		}
		t.check(len(r.Calls) == n, "want %d tool calls, got %d", n, len(r.Calls))
		t.check(len(r.Turns) == n+1, "want %d stops (one per call, then the answer), got %d", n+1, len(r.Turns))
		quoted := []string{q}
		for i, c := range r.Calls {
			t.check(strings.Contains(c.Str("arguments"), "echo"), "the shell tool's call has no echo command: %s", c.Str("arguments"))
			quoted = append(quoted, toolResult(c, i))
		}
		t.checkQuotes(r.Text(), quoted...)
		t.check(last.Usage("input_tokens_details", "cached_tokens") > 0,
			"the continuation was not resumed in place: cached_tokens 0 in %s", compact(last.Response().Get("usage")))
	}
}

// parallelCalls: one stop with three calls; the outputs are sent in reverse order.
func parallelCalls(t *T) {
	p := t.dial()
	tu := p.start(t.create("Weather and time in Paris?", M{"tools": []any{weatherTool, clockTool}, "metadata": meta("sim.parallel", "3")}))
	calls := t.needCalls(tu)
	t.check(len(calls) == 3, "want 3 parallel calls at one stop, got %d", len(calls))
	in := outputs(calls, 0, toolResult)
	var quoted []string
	for _, o := range in {
		quoted = append(quoted, o.(M)["output"].(string))
	}
	slices.Reverse(in)
	next := p.resume(tu, in)
	t.checkCompleted(next)
	t.check(len(next.Calls()) == 0, "want the answer after the parallel calls, got %d more calls", len(next.Calls()))
	t.checkQuotes(next.Text(), quoted...)
}

// toolOutputsThenMessage: the tool outputs may be followed by a new user message in the same
// continuation; it is a new user turn, on which the model may call tools again.
func toolOutputsThenMessage(t *T) {
	p := t.dial()
	const q1, q2 = "List the files.", "Also count the lines of README.md."
	tu := p.start(t.create(q1, M{"tools": []any{shellTool}}))
	calls := t.needCalls(tu)
	next := p.resume(tu, append(outputs(calls, 0, toolResult), userMessage(q2)))
	if t.sim("the new user turn gets its own tool call (one call per user turn)") {
		t.check(len(next.Calls()) == 1, "want one more call for the new user turn, got %d", len(next.Calls()))
	}
	r := p.drive(next, func(c Frame, i int) string { return toolResult(c, i+len(calls)) })
	t.checkCompleted(r.Last())
	if t.sim("the answer quotes both user turns and every output") {
		quoted := []string{q1, q2, toolResult(calls[0], 0)}
		for i, c := range r.Calls {
			quoted = append(quoted, toolResult(c, i+len(calls)))
		}
		t.checkQuotes(r.Text(), quoted...)
	}
}

// toolChoice: tool_choice "none" gets an answer without calls; a named function gets calls
// of that function only.
func toolChoice(t *T) {
	p := t.dial()
	tools := []any{weatherTool, clockTool}
	none := p.start(t.create("What time is it in Paris?", M{"tools": tools, "tool_choice": "none"}))
	t.checkCompleted(none)
	t.check(len(none.Calls()) == 0, "tool_choice none, but the model called %d tools", len(none.Calls()))
	forced := p.start(t.create("What time is it in Paris?", M{"tools": tools, "tool_choice": M{"type": "function", "name": "get_time"}}))
	for _, c := range t.needCalls(forced) {
		t.check(c.Str("name") == "get_time", "tool_choice names get_time, but the model called %s", c.Str("name"))
	}
	if t.isAppend() { // a forced tool choice calls at every step: end the rollout
		p.send(M{"type": "response.cancel", "response_id": forced.ID})
		p.expectEvent("response.incomplete", M{"response": M{"id": forced.ID, "incomplete_details": M{"reason": "cancelled"}}})
	}
}

// continuation: a new response continues an ended one by previous_response_id, on the same
// connection: the model sees the parent's context.
func continuation(t *T) {
	p := t.dial()
	const first, second = "Remember the code word: cobalt.", "What is the code word?"
	parent := p.rollout(t.create(first, nil), nil).Last()
	t.checkCompleted(parent)
	tu := p.start(t.create(second, M{"previous_response_id": parent.ID}))
	t.checkCompleted(tu)
	t.check(tu.ID != parent.ID, "the continuation has its parent's id")
	t.check(tu.Frames[0].Str("response", "previous_response_id") == parent.ID && tu.Response().Str("previous_response_id") == parent.ID,
		"previous_response_id %s is not echoed in the Response", parent.ID)
	if t.sim("the answer quotes the parent's input") {
		t.checkQuotes(tu.Text(), first, second)
	}
	cached := tu.Usage("input_tokens_details", "cached_tokens")
	if t.isAppend() {
		if t.sim("a rollout continued by previous_response_id rebuilds its context: cached_tokens 0") {
			t.check(cached == 0, "a rebuilt context reports cached_tokens %d", cached)
		}
	} else if t.sim("continuing the latest response resumes it in place: cached_tokens > 0") {
		t.check(cached > 0, "the continuation of the latest response was not resumed in place (cached_tokens 0)")
	}
}

// settingsEcho: the Response echoes the request's settings, in response.created and in the
// terminal event.
func settingsEcho(t *T) {
	p := t.dial()
	settings := M{"instructions": "Answer in one line.", "metadata": meta("purpose", "conformance"), "temperature": 0.5,
		"top_p": 0.9, "max_output_tokens": 256, "tool_choice": "none", "parallel_tool_calls": false, "store": false,
		"user": "conformance-user", "tools": []any{weatherTool}}
	tu := p.start(t.create("Hello.", settings))
	t.checkCompleted(tu)
	want := M{"model": t.cfg.Model, "previous_response_id": nil}
	for k, v := range settings {
		if k != "tools" {
			want[k] = v
		}
	}
	for _, f := range []Frame{tu.Frames[0].Obj("response"), tu.Response()} {
		if !contains(f, want) {
			t.fail(&Failure{Message: "the Response does not echo the request's settings", Expected: compact(want), Received: clip(f.String(), 1200)})
		}
		tools := items(f.List("tools"))
		t.check(len(tools) == 1 && tools[0].Str("name") == "get_weather" && tools[0].Type() == "function",
			"the Response does not echo the tools: %s", compact(f.Get("tools")))
	}
}

// queuedCreates: three creates sent at once are answered one after the other, in order,
// without interleaving (the grammar checks the interleaving).
func queuedCreates(t *T) {
	p := t.dial()
	inputs := []string{"The first queued create.", "The second queued create.", "The third queued create."}
	for _, in := range inputs {
		p.send(t.create(in, nil))
	}
	for i, in := range inputs {
		tu := p.await(nil)
		t.checkCompleted(tu)
		if t.sim("the answers come in the order of the creates (FIFO)") {
			t.checkQuotes(tu.Text(), in)
			for j, other := range inputs {
				t.check(j == i || !strings.Contains(tu.Text(), other), "answer %d quotes create %d: the queue is not FIFO", i+1, j+1)
			}
		}
	}
}

// storeNewConnection: a store:true rollout is continued by previous_response_id on a new
// connection.
func storeNewConnection(t *T) {
	p := t.dial()
	const first = "Remember the colour: teal."
	r := p.rollout(t.create(first, M{"store": true, "tools": []any{shellTool}}), nil)
	t.checkCompleted(r.Last())
	p2 := t.dial()
	tu := p2.start(t.create("Which colour did I mention?", M{"previous_response_id": r.Last().ID}))
	t.checkCompleted(tu)
	t.check(tu.Response().Str("previous_response_id") == r.Last().ID, "previous_response_id is not echoed")
	if t.sim("the answer quotes the stored chain, its tool outputs included") {
		quoted := []string{first, "Which colour did I mention?"}
		for i, c := range r.Calls {
			quoted = append(quoted, toolResult(c, i))
		}
		t.checkQuotes(tu.Text(), quoted...)
	}
}

// storeOverHTTP: a store:true response is retrieved with GET /v1/responses/{id} and continued
// with POST /v1/responses.
func storeOverHTTP(t *T) {
	p := t.dial()
	const first = "Remember the animal: otter."
	parent := p.rollout(t.create(first, M{"store": true}), nil).Last()
	t.checkCompleted(parent)
	status, got, raw := t.httpJSON("GET", "/responses/"+parent.ID, nil)
	if status != http.StatusOK {
		t.fail(&Failure{Message: "GET of a stored response", Expected: "200 and the Response", Received: fmt.Sprintf("%d %s", status, clip(string(raw), 400))})
	}
	t.checkResponseBody(got, raw)
	want := M{"id": parent.ID, "status": "completed", "output": parent.Response().Get("output")}
	if !contains(got, want) {
		t.fail(&Failure{Message: "GET returns another Response than the WebSocket's terminal event", Expected: compact(want), Received: clip(string(raw), 800)})
	}
	resp := t.postResponse(t.create("Which animal did I mention?", M{"previous_response_id": parent.ID, "store": true}))
	t.check(resp.Str("status") == "completed" && resp.Str("previous_response_id") == parent.ID,
		"the HTTP continuation: status %q, previous_response_id %q", resp.Str("status"), resp.Str("previous_response_id"))
	if t.sim("the HTTP answer quotes the stored parent") {
		t.checkQuotes(messageText(resp.List("output")), first)
	}
	if t.isAppend() {
		return
	}
	// A public response that stopped at a tool call is answered over HTTP.
	stop := p.start(t.create("Check the disk usage.", M{"store": true, "tools": []any{shellTool}}))
	calls := t.needCalls(stop)
	resp = t.postResponse(httpContinuation(stop, outputs(calls, 0, toolResult)))
	t.check(resp.Str("status") == "completed" && len(items(resp.List("output"))) > 0, "the HTTP continuation of a tool stop: %s", clip(resp.String(), 400))
	if t.sim("the HTTP answer quotes the tool output") {
		t.checkQuotes(messageText(resp.List("output")), "Check the disk usage.", toolResult(calls[0], 0))
	}
}

// maxOutputTokens: the answer is cut at max_output_tokens: the open item is closed with
// status incomplete, then response.incomplete with reason max_output_tokens.
func maxOutputTokens(t *T) {
	p := t.dial()
	tu := p.start(t.create("Write a long story about the sea, at least five hundred words.",
		M{"max_output_tokens": 16, "metadata": meta("sim.answer_tokens", "400")}))
	if tu.Stop.Type() != "response.incomplete" || tu.Response().Str("incomplete_details", "reason") != "max_output_tokens" {
		t.fail(&Failure{Message: "the answer was not cut at max_output_tokens",
			Expected: `response.incomplete {"incomplete_details":{"reason":"max_output_tokens"}}`, Received: tu.Stop.String()})
	}
	t.check(tu.Usage("output_tokens") <= 16, "output_tokens %d exceeds max_output_tokens 16", tu.Usage("output_tokens"))
	if n := len(tu.Items); n > 0 {
		t.check(tu.Items[n-1].Str("status") == "incomplete", "the cut item has status %q, want incomplete", tu.Items[n-1].Str("status"))
	}
}

// modelFailure: a model failure after response.created is response.failed with
// response.error, not an error frame — at the first step, and after a tool call.
func modelFailure(t *T) {
	p := t.dial()
	tu := p.start(t.create("This request fails.", M{"metadata": meta("sim.fail", "step:0")}))
	t.check(tu.Stop.Type() == "response.failed", "want response.failed, got %s", tu.Stop.Type())
	r := p.rollout(t.create("This rollout fails after a tool call.", M{"tools": []any{shellTool}, "metadata": meta("sim.fail", "step:1")}), nil)
	t.check(len(r.Calls) == 1 && r.Last().Stop.Type() == "response.failed", "want one call then response.failed, got %d calls and %s", len(r.Calls), r.Last().Stop.Type())
	p.stillUsable()
}

// ignoredFields: fields clients send that have no effect are accepted, and
// response.processed (sent by Codex) gets no reply.
func ignoredFields(t *T) {
	p := t.dial()
	first := p.start(t.create("Hello.", nil))
	p.send(M{"type": "response.processed", "response_id": first.ID})
	p.expectNothing()
	extra := M{"stream": true, "stream_options": M{"include_obfuscation": false}, "event_id": "evt_conformance",
		"client_metadata": M{"client": "conformance"}, "prompt_cache_key": "conformance", "include": []string{"reasoning.encrypted_content"}}
	t.checkCompleted(p.start(t.create("Hello again.", extra)))
}

// continuationAnsweredOnce: a continuation is answered by its response only, also when the
// resumed rollout ends at once (a model failure right at the resumption, or an instant
// answer). Repeated, because a server that races the rollout's end against the
// acknowledgement of its input may answer an accepted continuation twice.
func continuationAnsweredOnce(t *T) {
	p := t.dial()
	for i := range 12 {
		md := meta()
		if i%2 == 0 {
			md = meta("sim.fail", "step:1")
		}
		q := fmt.Sprintf("Task %d.", i+1)
		tu := p.start(t.create(q, M{"tools": []any{shellTool}, "metadata": md}))
		end := p.drive(p.resume(tu, outputs(t.needCalls(tu), 0, toolResult)), nil).Last()
		t.check(end.Ended(), "the rollout did not end")
		if i%2 == 1 && t.sim("the answer quotes its own task") {
			t.checkQuotes(end.Text(), q)
		}
		// The next frame must be the next create's response.created, which must stop at a
		// tool call: nothing else answers the continuation.
	}
	p.stillUsable()
}
