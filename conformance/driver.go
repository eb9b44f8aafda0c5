package conformance

import (
	"fmt"
	"strings"
)

// The function tools the scenarios offer (function tools only: the Open Responses schema's
// Tool union allows no other type, and -schema validates the echoed tools).
var (
	shellTool = M{"type": "function", "name": "exec_command", "description": "Run a shell command.",
		"parameters": M{"type": "object", "properties": M{"cmd": M{"type": "string"}}, "required": []string{"cmd"}}}
	weatherTool = M{"type": "function", "name": "get_weather", "description": "Current weather of a city.",
		"parameters": M{"type": "object", "properties": M{"location": M{"type": "string"}}, "required": []string{"location"}}}
	clockTool = M{"type": "function", "name": "get_time", "description": "Local time of a city.",
		"parameters": M{"type": "object", "properties": M{"city": M{"type": "string"}}, "required": []string{"city"}}}
)

// create is a response.create event with the configured model; extra members are added.
func (t *T) create(input any, extra M) M {
	m := M{"type": "response.create", "model": t.cfg.Model, "input": input}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// body is a POST /v1/responses body: a create without its type.
func body(create M) M {
	m := M{}
	for k, v := range create {
		if k != "type" {
			m[k] = v
		}
	}
	return m
}

func userMessage(text string) M {
	return M{"type": "message", "role": "user", "content": []any{M{"type": "input_text", "text": text}}}
}

func toolOutput(callID, output string) M {
	return M{"type": "function_call_output", "call_id": callID, "output": output}
}

// meta is a metadata object.
func meta(kv ...string) M {
	m := M{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Turn is what a response did up to its next stop: in the public shape one Response (it stops
// at its terminal event); in the append shape one stretch of a rollout (it stops at
// response.done, a suspension, or at the terminal event).
type Turn struct {
	ID     string  // the Response id (public: this response; append: the rollout)
	Stop   Frame   // response.done or the terminal event
	Items  []Frame // the model items since the previous stop
	Frames []Frame // the frames of this turn, in order
	req    M       // the create that started the chain (its settings carry over)
}

// Ended reports whether the turn ended with a terminal event.
func (tu *Turn) Ended() bool { return isTerminal(tu.Stop.Type()) }

// Status is "suspended" for response.done, else the terminal Response's status.
func (tu *Turn) Status() string {
	if tu.Stop.Type() == "response.done" {
		return "suspended"
	}
	return tu.Stop.Str("response", "status")
}

// Response is the terminal Response (nil after response.done).
func (tu *Turn) Response() Frame { return tu.Stop.Obj("response") }

// Calls are the complete function calls among the turn's items: the calls to answer next. A
// call cut off before it was complete (status incomplete: max_output_tokens, a full context
// window, a steer) is not pending and takes no output.
func (tu *Turn) Calls() []Frame {
	var calls []Frame
	for _, it := range tu.Items {
		if it.Type() == "function_call" && it.Str("status") != "incomplete" {
			calls = append(calls, it)
		}
	}
	return calls
}

// Text is the turn's answer text.
func (tu *Turn) Text() string {
	var l []any
	for _, it := range tu.Items {
		l = append(l, map[string]any(it))
	}
	return messageText(l)
}

// Usage is the usage of the stop: cumulative over the rollout in the append shape.
func (tu *Turn) Usage(key ...string) int {
	if tu.Stop.Type() == "response.done" {
		return tu.Stop.Num(append([]string{"usage"}, key...)...)
	}
	return tu.Stop.Num(append([]string{"response", "usage"}, key...)...)
}

// start sends a response.create and returns the response's first turn.
func (p *Peer) start(create M) *Turn {
	p.send(create)
	return p.await(create)
}

// await reads the next response of the connection, which must begin now with response.created,
// up to its next stop.
func (p *Peer) await(create M) *Turn {
	f := p.expectEvent("response.created", nil)
	tu := p.stopOf(f.Str("response", "id"), create)
	tu.Frames = append([]Frame{f}, tu.Frames...)
	return tu
}

// stopOf reads the frames of response id up to its next stop.
func (p *Peer) stopOf(id string, create M) *Turn {
	what := "the terminal event of " + id
	if p.shape == shapeAppend {
		what = "response.done or the terminal event of " + id
	}
	fs := p.until(what, func(f Frame) bool {
		return (f.Type() == "response.done" && f.Str("response_id") == id) ||
			(isTerminal(f.Type()) && f.Str("response", "id") == id)
	})
	tu := &Turn{ID: id, Stop: fs[len(fs)-1], Frames: fs, req: create}
	for _, v := range p.stateOf(id).stop {
		m, _ := v.(map[string]any)
		tu.Items = append(tu.Items, Frame(m))
	}
	return tu
}

// continuation is the input-carrying frame that continues tu: in the public shape a
// response.create with previous_response_id and the chain's settings, in the append shape a
// response.append.
func (p *Peer) continuation(tu *Turn, input []any) M {
	if p.shape == shapeAppend {
		return M{"type": "response.append", "response_id": tu.ID, "input": input}
	}
	m := M{}
	for k, v := range tu.req {
		switch k {
		case "input", "previous_response_id", "generate":
		default:
			m[k] = v
		}
	}
	m["input"] = input
	m["previous_response_id"] = tu.ID
	return m
}

// resume continues tu with input (tool outputs, then optionally messages) and returns the next
// turn. In the append shape the append must be accepted: no acknowledgement, no lifecycle
// event, the rollout's output continues.
func (p *Peer) resume(tu *Turn, input []any) *Turn {
	p.send(p.continuation(tu, input))
	if p.shape == shapeAppend {
		p.grammar(tu.lane()).resumed(tu.ID)
		return p.stopOf(tu.ID, tu.req)
	}
	return p.await(tu.req)
}

// resumeRejected continues tu with input that the server must reject with one error frame.
func (p *Peer) resumeRejected(tu *Turn, input []any, status int, code, param string) Frame {
	p.send(p.continuation(tu, input))
	return p.expectError(status, code, param)
}

// outputs answers every call of tu with out(call, i), i counting calls over the rollout.
func outputs(calls []Frame, first int, out func(call Frame, i int) string) []any {
	var in []any
	for i, c := range calls {
		in = append(in, toolOutput(c.Str("call_id"), out(c, first+i)))
	}
	return in
}

// toolResult is the default tool: a short output naming the call.
func toolResult(call Frame, i int) string {
	return fmt.Sprintf("result %d of %s", i+1, call.Str("name"))
}

// Rollout is a whole agent loop: every turn until the model answers.
type Rollout struct {
	Turns []*Turn
	Calls []Frame // every function call, in order
	Items []Frame // every model item, in order
}

// Last is the last turn.
func (r *Rollout) Last() *Turn { return r.Turns[len(r.Turns)-1] }

// Text is the final answer.
func (r *Rollout) Text() string { return r.Last().Text() }

// maxSteps bounds a rollout, so a model that never stops calling tools cannot hang the suite.
const maxSteps = 64

// rollout runs an agent loop: create, then at each stop with calls, answer every call (with
// out, or toolResult) and continue, until the model answers.
func (p *Peer) rollout(create M, out func(call Frame, i int) string) *Rollout {
	if out == nil {
		out = toolResult
	}
	return p.drive(p.start(create), out)
}

// drive continues the agent loop from tu until the model answers.
func (p *Peer) drive(tu *Turn, out func(call Frame, i int) string) *Rollout {
	if out == nil {
		out = toolResult
	}
	r := &Rollout{}
	for step := 0; ; step++ {
		r.Turns = append(r.Turns, tu)
		r.Items = append(r.Items, tu.Items...)
		calls := tu.Calls()
		r.Calls = append(r.Calls, calls...)
		if tu.Ended() && (p.shape == shapeAppend || len(calls) == 0 || tu.Status() != "completed") {
			return r
		}
		if step == maxSteps {
			p.t.Fatalf("the model is still calling tools after %d steps", maxSteps)
		}
		tu = p.resume(tu, outputs(calls, len(r.Calls)-len(calls), out))
	}
}

// needCalls skips the scenario under -model-contract any when the model answered without
// calling a tool (the scenario needs a pending call); under sim it is a failure.
func (t *T) needCalls(tu *Turn) []Frame {
	calls := tu.Calls()
	if len(calls) > 0 && (t.isAppend() == (tu.Stop.Type() == "response.done")) {
		return calls
	}
	if t.cfg.Contract == ContractAny {
		t.Skipf("the model answered without calling a tool; this scenario needs a pending call")
	}
	t.Fatalf("want a stop at tool calls, got %s with %d calls", tu.Stop.Type(), len(calls))
	return nil
}

// quotes reports which of the texts the sim's answer does not quote (it cuts each quote at
// about 64 characters, so only a prefix is looked for).
func missingQuotes(answer string, texts ...string) []string {
	var missing []string
	for _, s := range texts {
		if len(s) > 40 {
			s = s[:40]
		}
		if !strings.Contains(answer, s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// checkQuotes fails unless the sim's answer quotes every text and ends with a fingerprint.
func (t *T) checkQuotes(answer string, texts ...string) {
	if m := missingQuotes(answer, texts...); len(m) > 0 {
		t.Fatalf("the sim's answer does not quote %q (the context did not reach the model):\n%s", m, clip(answer, 800))
	}
	t.check(fingerprint(answer) != "", "the sim's answer ends without a context fingerprint: %q", clip(answer, 400))
}
