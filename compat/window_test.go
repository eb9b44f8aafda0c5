package compat_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
)

// windowFixture serves the sim with a context window of window tokens.
func windowFixture(t *testing.T, window int) *fixture {
	t.Helper()
	return newFixture(t, server.Options{Model: sim.NewSim(sim.SimOptions{ContextWindow: window})})
}

// windowFailed reports whether r, a terminal Response, failed with the sim's context-window
// error naming window.
func windowFailed(r wstest.Frame, window string) bool {
	return r.Str("status") == "failed" && r.Str("error", "code") == sim.CodeContextLengthExceeded &&
		strings.Contains(r.Str("error", "message"), "context window of "+window+" tokens")
}

// TestContextWindowItemReferences: sixty item_references to one stored item of a MiB are
// refused (failed, context_length_exceeded) after tokenizing about the window's worth of
// them: the refusal takes less time than ten creates that take the item once each, where
// rendering every reference took sixty. The item once, within the window, is answered.
func TestContextWindowItemReferences(t *testing.T) {
	f := windowFixture(t, 400_000)
	url := f.base + "/responses"
	item := strings.Repeat("lorem ipsum dolor sit amet ", (1<<20)/27) // 1 MiB, about 200,000 tokens
	st, stored := post(t, url, "", map[string]any{"model": "sim", "store": true, "max_output_tokens": 16,
		"input": []any{map[string]any{"type": "message", "role": "user", "id": "msg_window_big", "content": item}}})
	if st != 200 || stored.Str("status") == "failed" {
		t.Fatalf("storing the item: %d %v", st, stored.Get("error"))
	}
	refs := make([]any, 0, 61)
	for range 60 {
		refs = append(refs, ref("msg_window_big"))
	}
	refs = append(refs, userMsg("summarise"))

	once, refused := time.Duration(1<<62), time.Duration(1<<62)
	for range 2 { // the faster of two runs each: the machine is shared
		t0 := time.Now()
		st, r := post(t, url, "", map[string]any{"model": "sim", "max_output_tokens": 16, "input": []any{ref("msg_window_big"), userMsg("summarise")}})
		once = min(once, time.Since(t0))
		if st != 200 || r.Str("status") == "failed" {
			t.Fatalf("one reference, within the window: %d %v", st, r.Get("error"))
		}
		t0 = time.Now()
		st, r = post(t, url, "", map[string]any{"model": "sim", "max_output_tokens": 16, "input": refs})
		refused = min(refused, time.Since(t0))
		if st != 200 || !windowFailed(r, "400000") {
			t.Fatalf("sixty references: %d status %s error %v", st, r.Str("status"), r.Get("error"))
		}
		if out, _ := r.Get("output").([]any); len(out) != 0 || r.Get("usage", "input_tokens") != 0.0 {
			t.Fatalf("a refused create has output %v, usage %v", out, r.Get("usage"))
		}
	}
	t.Logf("one reference answered in %v, sixty refused in %v", once, refused)
	if refused > 10*once {
		t.Fatalf("sixty references refused in %v, one answered in %v: the refusal costs more than the window", refused, once)
	}
}

// TestContextWindowContinuation (WebSocket, public shape): a continuation whose tool output
// would take the rollout past the window ends response.failed (context_length_exceeded) after
// response.created; the rollout ends, and the stored parent stays whole: a continuation of it
// within the window is answered on the cold path (rebuilt from the store), and one over the
// window is refused on the cold path too. A warm-up over the window fails the same way.
func TestContextWindowContinuation(t *testing.T) {
	f := windowFixture(t, 5000)
	c := f.dial(t)
	big := strings.Repeat("lorem ipsum dolor sit amet ", 2000) // about 12,000 tokens

	r1 := turn(t, c, create("list the files", map[string]any{"tools": []any{shell}}))
	parent, call := respID(r1), callIDs(r1)[0]
	cont := func(output string) []wstest.Frame {
		return turn(t, c, create([]any{toolOutput(call, output)}, map[string]any{"tools": []any{shell}, "previous_response_id": parent}))
	}

	hot0 := f.srv.Counters().Hot.Load()
	r2 := cont(big)
	if f.srv.Counters().Hot.Load() != hot0+1 {
		t.Fatal("the continuation over the window did not take the hot path")
	}
	if r2[0].Type() != "response.created" || !windowFailed(final(r2).Get("response").(map[string]any), "5000") {
		t.Fatalf("a continuation over the window: %s … %s %v", r2[0].Type(), final(r2).Type(), final(r2).Get("response", "error"))
	}

	cold0 := f.srv.Counters().Cold.Load()
	r3 := cont("a.go b.go")
	if final(r3).Type() != "response.completed" || f.srv.Counters().Cold.Load() != cold0+1 {
		t.Fatalf("the parent, continued within the window after the failure: %s %v", final(r3).Type(), final(r3).Get("response", "error"))
	}
	r4 := cont(big)
	if f.srv.Counters().Cold.Load() != cold0+2 || !windowFailed(final(r4).Get("response").(map[string]any), "5000") {
		t.Fatalf("a cold continuation over the window: %s %v", final(r4).Type(), final(r4).Get("response", "error"))
	}

	warm := create([]any{userMsg(big)}, nil)
	warm["generate"] = false
	if w := turn(t, c, warm); !windowFailed(final(w).Get("response").(map[string]any), "5000") {
		t.Fatalf("a warm-up over the window: %s %v", final(w).Type(), final(w).Get("response", "error"))
	}
	if r := turn(t, c, create("hello", nil)); final(r).Type() != "response.completed" {
		t.Fatalf("a create within the window after the failures: %v", final(r))
	}
}

// TestContextWindowHTTP: over HTTP a create over the window answers 200 with the failed
// Response (a step's failure, as for any model failure), and one within it is answered. A
// compaction of a window over the model's (no model runs) is refused when a create expands it.
func TestContextWindowHTTP(t *testing.T) {
	f := windowFixture(t, 5000)
	url := f.base + "/responses"
	big := strings.Repeat("lorem ipsum dolor sit amet ", 2000)
	st, r := post(t, url, "", map[string]any{"model": "sim", "input": big})
	if st != 200 || !windowFailed(r, "5000") {
		t.Fatalf("a create over the window: %d %v", st, r)
	}
	st, cr := post(t, url+"/compact", "", map[string]any{"model": "sim", "input": big})
	out, _ := cr.Get("output").([]any)
	if st != 200 || len(out) != 1 {
		t.Fatalf("compact: %d %v", st, cr)
	}
	if st, r = post(t, url, "", map[string]any{"model": "sim", "input": []any{out[0], userMsg("go on")}}); st != 200 || !windowFailed(r, "5000") {
		t.Fatalf("a create from a compaction over the window: %d %v", st, r)
	}
	if st, r = post(t, url, "", map[string]any{"model": "sim", "input": "hello"}); st != 200 || r.Str("status") != "completed" {
		t.Fatalf("a create within the window: %d %v", st, r)
	}
}

// TestContextWindowContinuationReleasesBudget (WebSocket, public shape): a hot continuation
// refused by the window ends its rollout at once, racing the read loop that handed it the
// input; the input's bytes reserved in the server's memory budget are given back whichever
// side wins. Many refused continuations on one connection, then the connection closed: the
// budget is back to what it held before.
func TestContextWindowContinuationReleasesBudget(t *testing.T) {
	f := windowFixture(t, 2000)
	before := f.srv.Budget().InUse()
	c := f.dial(t)
	big := strings.Repeat("lorem ipsum dolor sit amet ", 500) // about 3,000 tokens
	for i := range 30 {
		r1 := turn(t, c, create("list the files", map[string]any{"tools": []any{shell}}))
		r2 := turn(t, c, create([]any{toolOutput(callIDs(r1)[0], big)}, map[string]any{"tools": []any{shell}, "previous_response_id": respID(r1)}))
		if !windowFailed(final(r2).Get("response").(map[string]any), "2000") {
			t.Fatalf("continuation %d over the window: %s %v", i, final(r2).Type(), final(r2).Get("response", "error"))
		}
	}
	c.C.CloseNow()
	waitFor(t, "the connection to close", func() bool { return len(f.srv.Snapshot()) == 0 })
	deadline := time.Now().Add(10 * time.Second)
	for f.srv.Budget().InUse() != before && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if held := f.srv.Budget().InUse(); held != before {
		t.Fatalf("the memory budget holds %d bytes after the connection closed (%d before it)", held, before)
	}
}
