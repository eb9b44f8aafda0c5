package conformance

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// The error scenarios: every error of the error table that a client can provoke. Each bad frame
// is answered by exactly one error frame, and the connection stays usable (except after an
// oversize frame).

// unknownID is a response id no server has issued.
const unknownID = "resp_00000000000000000000000000c0ffee"

// rejects sends each frame and expects the same error for each, then checks the connection
// still serves a response.
func (p *Peer) rejects(status int, code, param string, frames ...string) {
	for _, f := range frames {
		p.sendRaw(f)
		p.expectError(status, code, param)
	}
}

// errInvalidJSON: text that is not JSON, truncated JSON, JSON that is not an object.
func errInvalidJSON(t *T) {
	p := t.dial()
	p.rejects(400, "invalid_json", "", `hello`, `{"type":"response.create","model":"sim"`, `[1,2]`, `"response.create"`, `null`)
	p.stillUsable()
}

// errMissingType: a frame without type, or with type null.
func errMissingType(t *T) {
	p := t.dial()
	p.rejects(400, "missing_required_parameter", "type",
		fmt.Sprintf(`{"model":%q,"input":"hi"}`, t.cfg.Model), fmt.Sprintf(`{"type":null,"model":%q,"input":"hi"}`, t.cfg.Model))
	p.stillUsable()
}

// errUnknownEventType: an unknown type; response.append and response.cancel on the public
// shape; response.steer on the append shape.
func errUnknownEventType(t *T) {
	p := t.dial()
	p.rejects(400, "unknown_event_type", "type", `{"type":"response.nope"}`)
	if t.isAppend() {
		p.rejects(400, "unknown_event_type", "type", fmt.Sprintf(`{"type":"response.steer","previous_response_id":%q,"input":"faster"}`, unknownID))
	} else {
		p.rejects(400, "unknown_event_type", "type",
			fmt.Sprintf(`{"type":"response.append","response_id":%q,"input":[]}`, unknownID),
			fmt.Sprintf(`{"type":"response.cancel","response_id":%q}`, unknownID))
	}
	p.stillUsable()
}

// errMissingParameter: a create without model; an append or cancel without response_id.
func errMissingParameter(t *T) {
	p := t.dial()
	p.rejects(400, "missing_required_parameter", "model", `{"type":"response.create","input":"hi"}`)
	if t.sim(`model "" counts as missing (protocol decoding decisions)`) {
		p.rejects(400, "missing_required_parameter", "model", `{"type":"response.create","model":"","input":"hi"}`)
	}
	if t.isAppend() {
		p.rejects(400, "missing_required_parameter", "response_id", `{"type":"response.append","input":[]}`, `{"type":"response.cancel"}`)
	}
	p.stillUsable()
}

// errInvalidType: a field of the wrong type, or a number out of range, named by its path.
func errInvalidType(t *T) {
	p := t.dial()
	m := t.cfg.Model
	p.rejects(400, "invalid_type", "input[0].content[0].text",
		fmt.Sprintf(`{"type":"response.create","model":%q,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":5}]}]}`, m))
	p.rejects(400, "invalid_type", "max_output_tokens",
		fmt.Sprintf(`{"type":"response.create","model":%q,"input":"hi","max_output_tokens":"ten"}`, m))
	p.rejects(400, "integer_below_min_value", "max_output_tokens",
		fmt.Sprintf(`{"type":"response.create","model":%q,"input":"hi","max_output_tokens":-1}`, m),
		fmt.Sprintf(`{"type":"response.create","model":%q,"input":"hi","max_output_tokens":1}`, m))
	p.rejects(400, "invalid_type", "temperature", fmt.Sprintf(`{"type":"response.create","model":%q,"input":"hi","temperature":1e400}`, m))
	p.rejects(400, "invalid_type", "tools[0].name", fmt.Sprintf(`{"type":"response.create","model":%q,"input":"hi","tools":[{"type":"function","name":7}]}`, m))
	if t.isAppend() {
		p.rejects(400, "invalid_type", "input", fmt.Sprintf(`{"type":"response.append","response_id":%q,"input":"not an array"}`, unknownID))
	}
	p.stillUsable()
}

// errInvalidValue: a value outside an enum.
func errInvalidValue(t *T) {
	p := t.dial()
	p.rejects(400, "invalid_value", "input[0].role",
		fmt.Sprintf(`{"type":"response.create","model":%q,"input":[{"role":"wizard","content":"hi"}]}`, t.cfg.Model))
	// metadata over the Responses API's limits: 16 keys, values of 512 characters.
	many := M{}
	for i := range 17 {
		many[fmt.Sprintf("k%02d", i)] = "v"
	}
	p.send(t.create("hi", M{"metadata": many}))
	p.expectError(400, "invalid_value", "metadata")
	p.send(t.create("hi", M{"metadata": M{"note": strings.Repeat("x", 513)}}))
	p.expectError(400, "invalid_value", "metadata.note")
	if t.sim("a bad sim.* metadata value is invalid_value (package sampler)") {
		p.send(t.create("hi", M{"metadata": meta("sim.calls", "many")}))
		p.expectError(400, "invalid_value", "metadata.sim.calls")
	}
	p.stillUsable()
}

// errUnsupportedParameter: background:true on a WebSocket; generate:false on the append shape; an empty
// stream_id is invalid_stream_id.
func errUnsupportedParameter(t *T) {
	p := t.dial()
	p.send(t.create("hi", M{"background": true}))
	p.expectError(400, "unsupported_parameter", "background")
	p.send(t.create("hi", M{"stream_id": ""}))
	p.expectError(400, "invalid_stream_id", "stream_id")
	if t.isAppend() {
		p.send(t.create("hi", M{"generate": false}))
		p.expectError(400, "unsupported_parameter", "generate")
	}
	p.stillUsable()
}

// errUnknownParameter: a top-level member the client event does not have is answered with
// unknown_parameter naming it, as OpenAI answers a misspelt field; on the append shape also in
// response.append and response.cancel (whose own members are response_id, input, event_id).
func errUnknownParameter(t *T) {
	p := t.dial()
	p.send(t.create("hi", M{"temprature": 0.5}))
	p.expectError(400, "unknown_parameter", "temprature")
	if t.isAppend() {
		p.send(M{"type": "response.append", "response_id": unknownID, "input": []any{}, "model": t.cfg.Model})
		p.expectError(400, "unknown_parameter", "model")
		p.send(M{"type": "response.cancel", "response_id": unknownID, "reason": "done"})
		p.expectError(400, "unknown_parameter", "reason")
	}
	p.stillUsable()
}

// errBinaryFrame: a binary frame.
func errBinaryFrame(t *T) {
	p := t.dial()
	p.sendBinary([]byte(fmt.Sprintf(`{"type":"response.create","model":%q,"input":"hi"}`, t.cfg.Model)))
	p.expectError(400, "unsupported_frame", "")
	p.stillUsable()
}

// errOversizeFrame: a frame of exactly the frame limit is served; one of the limit + 1 bytes
// is answered with websocket_message_too_large, then the connection is closed with 1009.
// (The frames are padded with JSON whitespace, so only their size matters.)
func errOversizeFrame(t *T) {
	p := t.dial()
	p.sendRaw(padded(t, `{"type":"response.create","model":`+strconv.Quote(t.cfg.Model)+`,"input":"Exactly at the limit."`, t.maxFrame()))
	t.checkCompleted(p.await(nil))
	p.sendRaw(padded(t, `{"type":"response.create","model":`+strconv.Quote(t.cfg.Model)+`,"input":"One byte over."`, t.maxFrame()+1))
	p.expectError(413, "websocket_message_too_large", "")
	p.expectClose(websocket.StatusMessageTooBig)
}

// padded is the JSON object head (without its closing brace) padded with spaces to n bytes.
func padded(t *T, head string, n int64) string {
	pad := int(n) - len(head) - 1
	t.check(pad >= 0, "the frame limit %d is too small for a create", t.maxFrame())
	return head + strings.Repeat(" ", pad) + "}"
}

// errQueueFull: creates beyond the queue depth, sent while a response samples, are refused
// with websocket_queue_limit_reached; the others are served in order.
func errQueueFull(t *T) {
	p := t.dial()
	const n = 40
	p.send(t.create("Hold the sampling slot.", M{"metadata": meta("sim.speed", "1000", "sim.answer_tokens", "300")}))
	for i := range n {
		p.send(t.create(fmt.Sprintf("Queued create %d.", i+1), M{"metadata": meta("sim.speed", "instant")}))
	}
	refused, served := 0, 0
	for refused+served < n+1 {
		f := p.next(fmt.Sprintf("an answer to each of %d creates (%d refused and %d served so far)", n+1, refused, served))
		switch {
		case f.Type() == "error":
			if want := errorFrame(429, "websocket_queue_limit_reached", ""); !contains(f, want) {
				p.fail("unexpected error frame", compact(want), clip(show(f, p.lastRaw), 800))
			}
			refused++
		case isTerminal(f.Type()):
			served++
		}
	}
	t.check(refused > 0, "none of %d creates queued behind a sampling response was refused: the queue is unbounded or deeper than %d", n, n)
	p.stillUsable()
}

// errUnknownParent: previous_response_id that names no response: one error frame, and no
// response.created.
func errUnknownParent(t *T) {
	p := t.dial()
	p.send(t.create("Hello.", M{"previous_response_id": unknownID}))
	p.expectError(400, "previous_response_not_found", "previous_response_id")
	p.expectNothing()
	p.stillUsable()
}

// errCrossConnection: a store:false response is not found from another connection (nor over
// HTTP), but still on its own.
func errCrossConnection(t *T) {
	a := t.dial()
	const first = "Remember: this stays on its connection."
	parent := a.rollout(t.create(first, M{"store": false}), nil).Last()
	t.checkCompleted(parent)
	b := t.dial()
	cont := t.create("What did I say?", M{"store": false, "previous_response_id": parent.ID})
	b.send(cont)
	b.expectError(400, "previous_response_not_found", "previous_response_id")
	status, f, raw := t.httpJSON("GET", "/responses/"+parent.ID, nil)
	t.expectHTTPError("GET of a store:false response", status, f, raw, http.StatusNotFound, "", "")
	tu := a.start(cont)
	t.checkCompleted(tu)
	if t.sim("the continuation on its own connection quotes the parent") {
		t.checkQuotes(tu.Text(), first)
	}
}

// afterRejectedContinuation checks what a rejected continuation left behind: in the append
// shape the rollout is still suspended and good outputs resume it; in the public shape the
// failed continuation evicted its parent.
func (p *Peer) afterRejectedContinuation(tu *Turn, good []any) {
	if p.shape == shapeAppend {
		p.t.checkCompleted(p.drive(p.resume(tu, good), nil).Last())
		return
	}
	p.send(p.continuation(tu, good))
	p.expectError(400, "previous_response_not_found", "previous_response_id")
	p.stillUsable()
}

// toolStop starts a response that stops at tool calls.
func (p *Peer) toolStop() (*Turn, []Frame) {
	tu := p.start(p.t.create("List the files.", M{"store": false, "tools": []any{shellTool}}))
	return tu, p.t.needCalls(tu)
}

// errToolCallNotFound: a function_call_output for a call that is not in the chain — in a
// create without parent, and in a continuation.
func errToolCallNotFound(t *T) {
	p := t.dial()
	p.send(t.create([]any{toolOutput("call_conformance_orphan", "x")}, nil))
	p.expectError(400, "tool_call_not_found", "input")
	tu, calls := p.toolStop()
	good := outputs(calls, 0, toolResult)
	p.resumeRejected(tu, append([]any{toolOutput("call_conformance_unknown", "x")}, good...), 400, "tool_call_not_found", "input")
	p.afterRejectedContinuation(tu, good)
}

// errMissingToolOutput: a continuation that leaves a call without output; the message names
// the call.
func errMissingToolOutput(t *T) {
	p := t.dial()
	tu, calls := p.toolStop()
	e := p.resumeRejected(tu, []any{userMessage("Never mind.")}, 400, "missing_tool_output", "input")
	t.check(strings.Contains(e.Str("error", "message"), calls[0].Str("call_id")),
		"missing_tool_output does not name the call %s: %q", calls[0].Str("call_id"), e.Str("error", "message"))
	p.afterRejectedContinuation(tu, outputs(calls, 0, toolResult))
}

// errDuplicateToolOutput: two outputs for one call.
func errDuplicateToolOutput(t *T) {
	p := t.dial()
	tu, calls := p.toolStop()
	good := outputs(calls, 0, toolResult)
	p.resumeRejected(tu, append(slices.Clone(good), good[0]), 400, "duplicate_tool_output", "input")
	p.afterRejectedContinuation(tu, good)
}

// errEvictedParent: a continuation rejected with an error frame evicts its parent, which is
// then not found.
func errEvictedParent(t *T) {
	p := t.dial()
	parent := p.start(t.create("Hello.", M{"store": false}))
	p.send(t.create([]any{toolOutput("call_conformance_unknown", "x")}, M{"store": false, "previous_response_id": parent.ID}))
	p.expectError(400, "tool_call_not_found", "input")
	p.send(t.create("Hello again.", M{"store": false, "previous_response_id": parent.ID}))
	p.expectError(400, "previous_response_not_found", "previous_response_id")
	p.expectNothing()
	p.stillUsable()
}

// errEvictedAfterFailure: a continuation that ends with response.failed evicts its parent.
func errEvictedAfterFailure(t *T) {
	p := t.dial()
	parent := p.start(t.create("Hello.", M{"store": false}))
	failed := p.start(t.create("Fail now.", M{"store": false, "previous_response_id": parent.ID, "metadata": meta("sim.fail", "step:0")}))
	t.check(failed.Stop.Type() == "response.failed", "want response.failed, got %s", failed.Stop.Type())
	p.send(t.create("Hello again.", M{"store": false, "previous_response_id": parent.ID}))
	p.expectError(400, "previous_response_not_found", "previous_response_id")
	p.stillUsable()
}

// errHTTP: the HTTP side answers bad requests with {"error":{…}} and the status.
func errHTTP(t *T) {
	check := func(what string, body any, status int, code, param string) {
		var raw []byte
		switch b := body.(type) {
		case string:
			raw = []byte(b)
		default:
			raw = []byte(compact(b))
		}
		st, _, data := t.httpDo("POST", "/responses", raw)
		f, err := decodeFrame(data)
		if err != nil {
			t.fail(&Failure{Message: what + ": the error body is not a JSON object", Received: fmt.Sprintf("%d %s", st, clip(string(data), 400))})
		}
		t.expectHTTPError(what, st, f, data, status, code, param)
	}
	check("POST without model", M{"input": "hi"}, 400, "missing_required_parameter", "model")
	check("POST of text that is not JSON", "hello", 400, "invalid_json", "")
	check("POST with an unknown parent", M{"model": t.cfg.Model, "input": "hi", "store": false, "previous_response_id": unknownID},
		400, "previous_response_not_found", "previous_response_id")
	check("POST with background:true and store:false", M{"model": t.cfg.Model, "input": "hi", "background": true, "store": false}, 400, "invalid_value", "store")
	check("POST with a misspelt field", M{"model": t.cfg.Model, "input": "hi", "temprature": 0.5}, 400, "unknown_parameter", "temprature")
	status, f, raw := t.httpJSON("GET", "/responses/"+unknownID, nil)
	t.expectHTTPError("GET of an unknown response", status, f, raw, http.StatusNotFound, "", "")
}

// errOversizeBody: a POST body of exactly the frame limit is served; one of the limit + 1
// bytes is refused with 413 and the error envelope.
func errOversizeBody(t *T) {
	head := fmt.Sprintf(`{"model":%q,"store":false,"input":"At the limit."`, t.cfg.Model)
	st, _, data := t.httpDo("POST", "/responses", []byte(padded(t, head, t.maxFrame())))
	t.check(st == http.StatusOK, "POST of a body of exactly the frame limit (%d bytes): %d %s", t.maxFrame(), st, clip(string(data), 300))
	big := padded(t, head, t.maxFrame()+1)
	st, _, data = t.httpDo("POST", "/responses", []byte(big))
	f, err := decodeFrame(data)
	if err != nil {
		t.fail(&Failure{Message: "POST of a body over the frame limit: the error body is not a JSON object", Received: fmt.Sprintf("%d %s", st, clip(string(data), 400))})
	}
	code := ""
	if t.sim("a body over the limit has code request_body_too_large (package compat)") {
		code = "request_body_too_large"
	}
	t.expectHTTPError(fmt.Sprintf("POST of a %d-byte body", len(big)), st, f, data, http.StatusRequestEntityTooLarge, code, "")
}

// errResponseNotFound: append and cancel name a response that does not exist.
func errResponseNotFound(t *T) {
	p := t.dial()
	p.send(M{"type": "response.append", "response_id": unknownID, "input": []any{}})
	p.expectError(404, "response_not_found", "response_id")
	p.send(M{"type": "response.cancel", "response_id": unknownID})
	p.expectError(404, "response_not_found", "response_id")
	p.stillUsable()
}

// errResponseNotSuspended: an append to a rollout that is sampling, or that has ended; a
// cancel of a rollout that has ended.
func errResponseNotSuspended(t *T) {
	p := t.dial()
	p.send(t.create("Tell me a long story.", M{"metadata": meta("sim.speed", "1000", "sim.answer_tokens", "4000")}))
	id := p.expectEvent("response.created", nil).Str("response", "id")
	p.send(M{"type": "response.append", "response_id": id, "input": []any{}})
	p.expectErrorAmid(409, "response_not_suspended", "response_id")
	p.send(M{"type": "response.cancel", "response_id": id})
	p.until("the terminal event of "+id, func(f Frame) bool { return isTerminal(f.Type()) })
	p.send(M{"type": "response.append", "response_id": id, "input": []any{}})
	p.expectError(409, "response_not_suspended", "response_id")
	p.send(M{"type": "response.cancel", "response_id": id})
	p.expectError(409, "response_already_completed", "response_id")
	p.stillUsable()
}

// errResponseInProgress: previous_response_id names a rollout that has not ended.
func errResponseInProgress(t *T) {
	p := t.dial()
	tu, _ := p.toolStop()
	p.send(t.create("Continue.", M{"previous_response_id": tu.ID}))
	p.expectError(409, "response_in_progress", "previous_response_id")
	p.send(M{"type": "response.cancel", "response_id": tu.ID})
	p.expectEvent("response.incomplete", M{"response": M{"id": tu.ID}})
	p.stillUsable()
}
