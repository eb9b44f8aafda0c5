package conformance

// The scenarios of the public shape only.

import (
	"fmt"
	"net/http"
	"strings"
)

// warmUp: generate:false prepares a response without running the model (created, completed,
// output [], zero usage); input:[] chained on it then runs the model on the warm-up's input.
func warmUp(t *T) {
	p := t.dial()
	const q = "Hello from the warm-up."
	settings := func(extra M) M {
		m := M{"store": false, "instructions": "You are a coding agent."}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	w := p.start(t.create([]any{userMessage(q)}, settings(M{"generate": false})))
	t.checkCompleted(w)
	for _, f := range w.Frames[1 : len(w.Frames)-1] {
		t.check(f.Type() == "response.in_progress", "a warm-up runs no model, but sent %s", f.Type())
	}
	u := w.Response().Obj("usage")
	t.check(len(w.Items) == 0 && u != nil && u.Num("input_tokens") == 0 && u.Num("output_tokens") == 0 && u.Num("total_tokens") == 0,
		"a warm-up has output [] and zero usage: output %s, usage %s", compact(w.Response().Get("output")), compact(u))
	tu := p.start(t.create([]any{}, settings(M{"previous_response_id": w.ID})))
	t.checkCompleted(tu)
	t.check(tu.Text() != "", "the response after the warm-up has no answer")
	if t.sim("the answer quotes the warm-up's input, resumed in place (cached_tokens > 0)") {
		t.checkQuotes(tu.Text(), q)
		t.check(tu.Usage("input_tokens_details", "cached_tokens") > 0, "input:[] after a warm-up was not resumed in place (cached_tokens 0)")
	}
}

// hotAndCold: a continuation of the latest response with unchanged settings resumes in place
// (hot: cached_tokens > 0); with changed settings, or from an older response (a fork), the
// context is rebuilt (cold: cached_tokens 0). The model sees the same context either way.
func hotAndCold(t *T) {
	chain := func(tag string) (*Peer, *Turn, *Turn) {
		p := t.dialShape(shapePublic, nil, "")
		r1 := p.start(t.create("Check the disk usage.", M{"store": false, "tools": []any{shellTool}, "metadata": meta("tag", "a")}))
		cont := p.continuation(r1, outputs(t.needCalls(r1), 0, func(Frame, int) string { return "42% used" }))
		cont["metadata"] = meta("tag", tag)
		p.send(cont)
		return p, r1, p.await(cont)
	}
	p, r1, hot := chain("a")
	_, _, cold := chain("b")
	t.checkCompleted(hot)
	t.checkCompleted(cold)
	t.check(hot.Usage("input_tokens_details", "cached_tokens") > 0, "the hot path reports cached_tokens 0")
	t.check(cold.Usage("input_tokens_details", "cached_tokens") == 0, "the cold path reports cached_tokens %d", cold.Usage("input_tokens_details", "cached_tokens"))
	t.check(fingerprint(hot.Text()) != "" && fingerprint(hot.Text()) == fingerprint(cold.Text()),
		"hot and cold path gave the model different contexts: %s vs %s", fingerprint(hot.Text()), fingerprint(cold.Text()))
	// A fork: r1 is no longer the latest response of its rollout.
	fork := p.resume(r1, outputs(r1.Calls(), 0, func(Frame, int) string { return "42% used" }))
	t.checkCompleted(fork)
	t.check(fork.Usage("input_tokens_details", "cached_tokens") == 0, "a fork from an older response reports cached_tokens %d", fork.Usage("input_tokens_details", "cached_tokens"))
	t.check(fingerprint(fork.Text()) == fingerprint(hot.Text()), "the fork gave the model another context: %s vs %s", fingerprint(fork.Text()), fingerprint(hot.Text()))
}

// httpRollout: the tool rollout over HTTP — POST /v1/responses as JSON or as Server-Sent
// Events, each step chained by previous_response_id on a stored response — gives the same
// items and answer as over the WebSocket.
func httpRollout(stream bool) func(*T) {
	return func(t *T) {
		req := t.create("Count the files, then the lines.", M{"store": true, "tools": []any{shellTool}, "metadata": meta("sim.calls", "2")})
		r := &Rollout{}
		var tu *Turn
		for step := 0; ; step++ {
			create := req
			if tu != nil {
				create = httpContinuation(tu, outputs(tu.Calls(), len(r.Calls)-len(tu.Calls()), toolResult))
			}
			if stream {
				tu = t.postSSE(create, newGrammar(shapePublic, t.ids))
			} else {
				resp := t.postResponse(create)
				tu = &Turn{ID: resp.Str("id"), req: create, Stop: Frame{"type": "response." + resp.Str("status"), "response": map[string]any(resp)}}
				tu.Items = items(resp.List("output"))
			}
			r.Turns = append(r.Turns, tu)
			r.Items = append(r.Items, tu.Items...)
			r.Calls = append(r.Calls, tu.Calls()...)
			if len(tu.Calls()) == 0 || tu.Status() != "completed" {
				break
			}
			t.check(step < maxSteps, "the model is still calling tools after %d steps", maxSteps)
		}
		t.checkCompleted(r.Last())
		t.check(r.Text() != "", "the HTTP rollout has no answer")
		if t.sim("the HTTP rollout equals the WebSocket rollout: same items modulo ids, same answer") {
			ws := t.dialShape(shapePublic, nil, "").rollout(req, nil)
			t.sameRollouts("WebSocket", ws, "HTTP", r)
		}
	}
}

// steer: response.steer on the public shape gets a response.steer.* answer (Tether: failed,
// steering_not_supported).
func steer(t *T) {
	p := t.dial()
	tu := p.start(t.create("Hello.", nil))
	p.send(M{"type": "response.steer", "previous_response_id": tu.ID, "input": "Be brief."})
	f := p.next("response.steer.*")
	if t.sim("a steer for a response that has completed gets response.steer.failed response_already_completed") {
		if !contains(f, M{"type": "response.steer.failed", "error": M{"code": "response_already_completed"}}) {
			t.fail(&Failure{Message: "unexpected answer to response.steer", Expected: `{"type":"response.steer.failed","error":{"code":"response_already_completed"}}`, Received: clip(show(f, p.lastRaw), 800)})
		}
	} else {
		t.check(strings.HasPrefix(f.Type(), "response.steer."), "want a response.steer.* answer, got %s", f.Type())
	}
	p.stillUsable()
}

// background: a POST with background:true answers at once with its Response (background
// true, status queued or in_progress); GET ?stream=true replays its events from
// sequence_number 0 to the terminal event (grammar-checked), ?starting_after=N exactly the
// events after N; GET then answers the finished Response; cancelling it is 400 (only a
// queued or running background response can be cancelled).
func background(t *T) {
	st, created, raw := t.httpJSON("POST", "/responses", M{"model": t.cfg.Model, "input": "Answer in the background.", "background": true})
	if st != http.StatusOK {
		t.fail(&Failure{Message: "POST with background:true", Expected: "200 and the Response", Received: fmt.Sprintf("%d %s", st, clip(string(raw), 400))})
	}
	status := created.Str("status")
	t.check(created.Get("background") == true && (status == "queued" || status == "in_progress" || status == "completed"),
		"the background create answered background %v, status %q", created.Get("background"), status)
	id := created.Str("id")
	stream := func(query string) []Frame {
		st, ctype, data := t.httpDo("GET", "/responses/"+id+"?stream=true"+query, nil)
		if st != http.StatusOK || !strings.HasPrefix(ctype, "text/event-stream") {
			t.fail(&Failure{Message: "GET /responses/{id}?stream=true" + query, Expected: "200 text/event-stream",
				Received: fmt.Sprintf("%d %s %s", st, ctype, clip(string(data), 400))})
		}
		if query == "" {
			return t.sseEvents(data, NewGrammar(ShapePublic))
		}
		return t.sseEvents(data, nil)
	}
	all := stream("")
	for i, f := range all {
		n, _ := f.Int("sequence_number")
		t.check(n == i, "replayed event %d (%s) has sequence_number %d", i, f.Type(), n)
	}
	t.check(all[len(all)-1].Type() == "response.completed", "the background response ended %s", all[len(all)-1].Type())
	tail := stream("&starting_after=1")
	t.check(len(tail) == len(all)-2, "starting_after=1 replayed %d events, want %d", len(tail), len(all)-2)
	for i, f := range tail {
		n, _ := f.Int("sequence_number")
		t.check(n == i+2 && f.Type() == all[i+2].Type(), "resumed event %d: %s %d, want %s %d", i, f.Type(), n, all[i+2].Type(), i+2)
	}
	st, got, raw := t.httpJSON("GET", "/responses/"+id, nil)
	t.check(st == http.StatusOK && got.Str("status") == "completed" && got.Get("background") == true,
		"GET of the finished background response: %d %s", st, clip(string(raw), 400))
	st, f, raw := t.httpJSON("POST", "/responses/"+id+"/cancel", nil)
	t.expectHTTPError("cancel of a completed background response", st, f, raw, http.StatusBadRequest, "", "")
}
