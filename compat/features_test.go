package compat_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/conformance"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

func TestWarmupThenEmptyInputTakesHotPath(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	opts := map[string]any{"store": false, "instructions": "You are a coding agent.", "tools": []any{}}
	warm := create([]any{userMsg("hello")}, opts)
	warm["generate"] = false
	w := turn(t, c, warm)
	if len(w) != 2 || w[0].Type() != "response.created" || w[1].Type() != "response.completed" {
		t.Fatalf("warm-up events: %v", w)
	}
	if out, _ := final(w).Get("response", "output").([]any); len(out) != 0 || usage(w, "total_tokens") != 0 || usage(w, "input_tokens") != 0 {
		t.Fatalf("warm-up must have output [] and zero usage: %v", final(w))
	}
	hot0 := f.srv.Counters().Hot.Load()
	next := create([]any{}, opts)
	next["previous_response_id"] = respID(w)
	r := turn(t, c, next)
	if f.srv.Counters().Hot.Load()-hot0 != 1 {
		t.Fatalf("input:[] after a warm-up did not take the hot path")
	}
	if !strings.Contains(answer(r), "hello") || usage(r, "input_tokens_details", "cached_tokens") == 0 {
		t.Fatalf("warm-up context not used: %q cached=%d", answer(r), usage(r, "input_tokens_details", "cached_tokens"))
	}
	// A warm-up mid-connection, chained on a real answer, then new input: hot path again.
	warm2 := create([]any{userMsg("second question")}, opts)
	warm2["generate"] = false
	warm2["previous_response_id"] = respID(r)
	w2 := turn(t, c, warm2)
	next2 := create([]any{userMsg("go")}, opts)
	next2["previous_response_id"] = respID(w2)
	r2 := turn(t, c, next2)
	if f.srv.Counters().Hot.Load()-hot0 != 2 || !strings.Contains(answer(r2), "second question") {
		t.Fatalf("mid-connection warm-up: hot=%d answer %q", f.srv.Counters().Hot.Load()-hot0, answer(r2))
	}
}

func TestCreatesQueueFIFO(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	for _, in := range []string{"one", "two", "three"} {
		c.Send(create(in, nil))
	}
	for _, in := range []string{"one", "two", "three"} {
		fs := c.Until("response.completed")
		wstest.CheckGrammar(t, conformance.ShapePublic, fs)
		if !strings.Contains(answer(fs), in) {
			t.Fatalf("responses out of order: want %q, got %q", in, answer(fs))
		}
	}
}

func TestUnsupportedAndIgnoredFields(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	c.Send(create("x", map[string]any{"background": true}))
	c.ExpectError(400, "unsupported_parameter", "background")
	c.Send(create("x", map[string]any{"stream_id": ""}))
	c.ExpectError(400, "invalid_stream_id", "stream_id")
	c.Send(map[string]any{"type": "response.processed", "response_id": "resp_x"})
	c.Send(map[string]any{"type": "response.steer", "previous_response_id": "resp_x", "input": "faster"})
	s := c.Next()
	if s.Type() != "response.steer.failed" || s.Str("error", "code") != "response_not_found" {
		t.Fatalf("steer answer: %v", s)
	}
	// An unknown top-level field is unknown_parameter, as OpenAI answers it.
	c.Send(create("x", map[string]any{"some_future_field": map[string]any{"a": 1}}))
	c.ExpectError(400, "unknown_parameter", "some_future_field")
	// Fields clients send that we accept and ignore.
	r := turn(t, c, create("ok", map[string]any{"stream": true, "stream_options": map[string]any{"include_obfuscation": false},
		"event_id": "evt_1", "client_metadata": map[string]string{"x": "y"}, "prompt_cache_key": "k", "include": []string{"reasoning.encrypted_content"}}))
	if final(r).Type() != "response.completed" {
		t.Fatalf("ignored fields broke the request")
	}
	// response.processed got no reply: the next frame is this response's.
	if r[0].Type() != "response.created" {
		t.Fatal("unexpected reply to response.processed")
	}
}

func TestConnectionAgeLimitPublic(t *testing.T) {
	f := newFixture(t, server.Options{Limits: session.Limits{MaxConnectionAge: 300 * time.Millisecond}})
	c := f.dial(t)
	turn(t, c, create("quick", nil))
	e := c.Next()
	if e.Type() != "error" || e.Str("error", "code") != "websocket_connection_limit_reached" {
		t.Fatalf("want the connection limit error, got %v", e)
	}
	c.ExpectClose(websocket.StatusGoingAway)
}

func TestStoredResponseOverHTTPAndNewConnection(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	r1 := turn(t, c, create([]any{userMsg("Remember: teal")}, map[string]any{"store": true}))
	id := respID(r1)
	// Continue on a new connection (cold path from the Store).
	c2 := f.dial(t)
	r2 := turn(t, c2, create("Which colour?", map[string]any{"previous_response_id": id}))
	if !strings.Contains(answer(r2), "teal") {
		t.Fatalf("store continuation lost the chain: %q", answer(r2))
	}
	// GET, input_items, DELETE.
	var got map[string]any
	httpJSON(t, "GET", f.base+"/responses/"+id, nil, 200, &got)
	if got["id"] != id || got["status"] != "completed" {
		t.Fatalf("GET: %v", got)
	}
	var items map[string]any
	httpJSON(t, "GET", f.base+"/responses/"+id+"/input_items?limit=1&order=asc", nil, 200, &items)
	data, _ := items["data"].([]any)
	if items["object"] != "list" || len(data) != 1 || items["has_more"] != false || wstest.Frame(data[0].(map[string]any)).Str("id") == "" {
		t.Fatalf("input_items: %v", items)
	}
	var del map[string]any
	httpJSON(t, "DELETE", f.base+"/responses/"+id, nil, 200, &del)
	if del["deleted"] != true {
		t.Fatalf("DELETE: %v", del)
	}
	httpJSON(t, "GET", f.base+"/responses/"+id, nil, 404, &got)
	if e, _ := got["error"].(map[string]any); e == nil || e["message"] == nil || e["type"] == nil {
		t.Fatalf("404 body: %v", got)
	}
}

func TestHTTPJSONAndContinuation(t *testing.T) {
	f := newFixture(t, server.Options{})
	var r1 map[string]any
	httpJSON(t, "POST", f.base+"/responses", map[string]any{"model": "sim", "input": "Remember: amber", "tools": []any{shell}}, 200, &r1)
	if r1["status"] != "completed" || r1["store"] != true {
		t.Fatalf("POST JSON: %v", r1)
	}
	out := r1["output"].([]any)
	call := wstest.Frame(out[0].(map[string]any))
	var r2 map[string]any
	httpJSON(t, "POST", f.base+"/responses", map[string]any{"model": "sim", "previous_response_id": r1["id"], "tools": []any{shell},
		"input": []any{toolOutput(call.Str("call_id"), "done")}}, 200, &r2)
	msg := wstest.Frame(r2["output"].([]any)[0].(map[string]any))
	if txt := wstest.Frame(msg.Get("content").([]any)[0].(map[string]any)).Str("text"); !strings.Contains(txt, "amber") {
		t.Fatalf("HTTP continuation lost the chain: %q", txt)
	}
	var e map[string]any
	httpJSON(t, "POST", f.base+"/responses", map[string]any{"model": "sim", "store": false, "previous_response_id": "resp_nope", "input": "x"}, 400, &e)
	if e["error"].(map[string]any)["code"] != "previous_response_not_found" {
		t.Fatalf("unknown parent over HTTP: %v", e)
	}
	httpJSON(t, "POST", f.base+"/responses", map[string]any{"input": "x"}, 400, &e)
	if er := e["error"].(map[string]any); er["code"] != "missing_required_parameter" || er["param"] != "model" {
		t.Fatalf("missing model over HTTP: %v", e)
	}
}

func TestHTTPSSE(t *testing.T) {
	f := newFixture(t, server.Options{})
	body, _ := json.Marshal(map[string]any{"model": "sim", "input": "stream me", "stream": true, "store": false})
	resp, err := http.Post(f.base+"/responses", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	raw, _ := io.ReadAll(resp.Body)
	if bytes.Contains(raw, []byte("\r")) || bytes.Contains(raw, []byte("[DONE]")) {
		t.Fatalf("SSE must be LF only and have no [DONE]")
	}
	var fs []wstest.Frame
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<24)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var fr wstest.Frame
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &fr); err != nil {
				t.Fatalf("bad data line %q", line)
			}
			if fr.Type() != event {
				t.Fatalf("event: %s but data type %s", event, fr.Type())
			}
			fs = append(fs, fr)
		case line == "":
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	wstest.CheckGrammar(t, conformance.ShapePublic, fs)
	if final(fs).Type() != "response.completed" || !strings.Contains(answer(fs), "stream me") {
		t.Fatalf("SSE stream: %v", final(fs))
	}
}

func TestHTTPBodyTooLarge(t *testing.T) {
	f := newFixture(t, server.Options{Limits: session.Limits{MaxFrame: 1000}})
	var e map[string]any
	httpJSON(t, "POST", f.base+"/responses", map[string]any{"model": "sim", "input": strings.Repeat("x", 2000)}, 413, &e)
	if e["error"] == nil {
		t.Fatalf("413 body: %v", e)
	}
}

// httpJSON sends body (nil for none) and decodes the JSON answer into out, checking status.
func httpJSON(t *testing.T, method, url string, body any, status int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, resp.StatusCode, status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, url, raw)
	}
}

func TestRegistryBoundKeepsNewestSegment(t *testing.T) {
	f := newFixture(t, server.Options{Limits: session.Limits{CacheResponses: 2}})
	c := f.dial(t)
	opts := map[string]any{"store": false, "tools": []any{shell}}
	a := turn(t, c, create("chain a", opts)) // suspended at a tool call
	turn(t, c, create("chain b", map[string]any{"store": false}))
	m := f.srv.Metrics()
	if n := m.Suspended.Load(); n != 2 {
		t.Fatalf("%d suspended rollouts before the bound is passed, want 2 (a and b)", n)
	}
	d := turn(t, c, create("chain d", opts))
	// a was the least recently used: evicted, and its suspended rollout ended silently (b
	// and d stay suspended).
	waitFor(t, "the rollout of the evicted segment to end", func() bool { return m.Suspended.Load() == 2 && m.Evictions.Load() == 1 })
	c.Send(create([]any{toolOutput(callIDs(a)[0], "ok")}, map[string]any{"store": false, "tools": []any{shell}, "previous_response_id": respID(a)}))
	c.ExpectError(400, "previous_response_not_found", "previous_response_id")
	hot0 := f.srv.Counters().Hot.Load()
	r := turn(t, c, create([]any{toolOutput(callIDs(d)[0], "ok")}, map[string]any{"store": false, "tools": []any{shell}, "previous_response_id": respID(d)}))
	if !strings.Contains(answer(r), "chain d") || f.srv.Counters().Hot.Load()-hot0 != 1 {
		t.Fatalf("newest segment not resumed hot: %q (hot %d, cold %d, new %d)", answer(r), f.srv.Counters().Hot.Load()-hot0, f.srv.Counters().Cold.Load(), f.srv.Counters().New.Load())
	}
}

func TestShutdownLetsInFlightResponseFinish(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	c.Send(create("long", map[string]any{"metadata": map[string]string{"sim.speed": "65", "sim.answer_tokens": "30"}}))
	first := c.Next()
	if first.Type() != "response.created" {
		t.Fatalf("got %v", first)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- f.srv.Shutdown(ctx)
	}()
	rest := c.Until("response.completed", "response.incomplete")
	if final(rest).Type() != "response.completed" {
		t.Fatalf("in-flight response cut within the grace: %v", final(rest))
	}
	c.ExpectClose(websocket.StatusGoingAway)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestPipelinedContinuationIsRefused(t *testing.T) {
	f := newFixture(t, server.Options{Model: sim.NewSim(sim.SimOptions{Speed: sim.Speed65, Realtime: true})})
	c := f.dial(t)
	c.Send(create("slow", map[string]any{"store": false, "metadata": map[string]string{"sim.speed": "65"}}))
	created := c.Next()
	c.Send(create("next", map[string]any{"store": false, "previous_response_id": created.Str("response", "id")}))
	c.ExpectErrorSkipping(409, "response_in_progress", "previous_response_id")
	rest := c.Until("response.completed")
	if final(rest).Str("response", "id") != created.Str("response", "id") {
		t.Fatal("the running response did not complete")
	}
	r := turn(t, c, create("next", map[string]any{"store": false, "previous_response_id": created.Str("response", "id")}))
	if !strings.Contains(answer(r), "slow") {
		t.Fatalf("continuation after the terminal event lost the chain: %q", answer(r))
	}
}
