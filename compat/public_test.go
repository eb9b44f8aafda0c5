package compat_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

func TestImmediateContinuations100(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	fs := turn(t, c, create("start", map[string]any{"store": false, "tools": []any{shell}, "metadata": map[string]string{"sim.calls": "100"}}))
	hot0 := f.srv.Counters().Hot.Load()
	for i := 0; i < 100; i++ {
		ids := callIDs(fs)
		if len(ids) != 1 {
			t.Fatalf("turn %d: want one call, got %d (%s)", i, len(ids), final(fs).Type())
		}
		fs = turn(t, c, create([]any{toolOutput(ids[0], "ok")}, map[string]any{"store": false, "tools": []any{shell},
			"metadata": map[string]string{"sim.calls": "100"}, "previous_response_id": respID(fs)}))
		if final(fs).Type() != "response.completed" {
			t.Fatalf("turn %d ended %s", i, final(fs).Type())
		}
	}
	if answer(fs) == "" {
		t.Fatal("the 100th continuation did not answer")
	}
	if hot := f.srv.Counters().Hot.Load() - hot0; hot != 100 {
		t.Errorf("%d of 100 continuations took the hot path", hot)
	}
}

func TestStoreFalseCodeWord(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	r1 := turn(t, c, create("Remember the code word: cobalt", map[string]any{"store": false}))
	cont := create("What is the code word?", map[string]any{"store": false, "previous_response_id": respID(r1)})
	r2 := turn(t, c, cont)
	if !strings.Contains(answer(r2), "cobalt") {
		t.Fatalf("answer lost the chain: %q", answer(r2))
	}
	if final(r2).Str("response", "previous_response_id") != respID(r1) {
		t.Errorf("previous_response_id not echoed")
	}
	c2 := f.dial(t)
	c2.Send(cont)
	c2.ExpectError(400, "previous_response_not_found", "previous_response_id")
	resp, err := http.Get(f.base + "/responses/" + respID(r1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("GET of a store:false response: %d, want 404", resp.StatusCode)
	}
}

func TestFailedContinuationEvictsParent(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	r1 := turn(t, c, create("hello", map[string]any{"store": false}))
	bad := create([]any{toolOutput("call_missing", "x")}, map[string]any{"store": false, "previous_response_id": respID(r1)})
	c.Send(bad)
	c.ExpectError(400, "tool_call_not_found", "input")
	c.Send(create("again", map[string]any{"store": false, "previous_response_id": respID(r1)}))
	c.ExpectError(400, "previous_response_not_found", "previous_response_id")
	r := turn(t, c, create("a new chain", map[string]any{"store": false}))
	if final(r).Type() != "response.completed" {
		t.Fatalf("socket did not serve a new chain")
	}
}

func TestThreeTurnsWithToolCall(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	opts := map[string]any{"store": false, "tools": []any{weather}}
	r1 := turn(t, c, create([]any{userMsg("Weather in Paris?")}, opts))
	ids := callIDs(r1)
	if len(ids) != 1 {
		t.Fatalf("want a tool call, got %v", final(r1))
	}
	o2 := map[string]any{"store": false, "tools": []any{weather}, "previous_response_id": respID(r1)}
	r2 := turn(t, c, create([]any{toolOutput(ids[0], "18C and cloudy")}, o2))
	o3 := map[string]any{"store": false, "tools": []any{weather}, "previous_response_id": respID(r2)}
	r3 := turn(t, c, create([]any{userMsg("And tomorrow?")}, o3))
	if len(callIDs(r3)) == 1 { // the default policy calls once per user turn: answer it
		o4 := map[string]any{"store": false, "tools": []any{weather}, "previous_response_id": respID(r3)}
		r3 = turn(t, c, create([]any{toolOutput(callIDs(r3)[0], "rain")}, o4))
	}
	a := answer(r3)
	for _, want := range []string{"Weather in Paris?", "18C and cloudy", "And tomorrow?"} {
		if !strings.Contains(a, want) {
			t.Errorf("third answer does not quote %q: %q", want, a)
		}
	}
}

func TestMissingTypeKeepsSocketOpen(t *testing.T) {
	f := newFixture(t, server.Options{})
	c := f.dial(t)
	c.SendRaw(`{"model":"m","input":"hi"}`)
	c.ExpectError(400, "missing_required_parameter", "type")
	turn(t, c, create("still here", nil))
}

func TestHotAndColdPathSameFingerprint(t *testing.T) {
	f := newFixture(t, server.Options{})
	run := func(secondMeta map[string]string) [][]wstest.Frame {
		c := f.dial(t)
		r1 := turn(t, c, create("Check the disk usage.", map[string]any{"store": false, "tools": []any{shell}, "metadata": map[string]string{"tag": "a"}}))
		r2 := turn(t, c, create([]any{toolOutput(callIDs(r1)[0], "42% used")}, map[string]any{"store": false, "tools": []any{shell},
			"metadata": secondMeta, "previous_response_id": respID(r1)}))
		return [][]wstest.Frame{r1, r2}
	}
	hot0, cold0 := f.srv.Counters().Hot.Load(), f.srv.Counters().Cold.Load()
	hot := run(map[string]string{"tag": "a"})  // same settings: hot path
	cold := run(map[string]string{"tag": "b"}) // changed metadata: cold path
	if f.srv.Counters().Hot.Load()-hot0 != 1 || f.srv.Counters().Cold.Load()-cold0 != 1 {
		t.Fatalf("counters: hot %d cold %d, want 1 and 1", f.srv.Counters().Hot.Load()-hot0, f.srv.Counters().Cold.Load()-cold0)
	}
	if fh, fc := fingerprint(t, hot[1]), fingerprint(t, cold[1]); fh != fc {
		t.Fatalf("hot path fingerprint %s != cold path %s", fh, fc)
	}
	hc := usage(hot[1], "input_tokens_details", "cached_tokens")
	cc := usage(cold[1], "input_tokens_details", "cached_tokens")
	if hc == 0 || cc != 0 {
		t.Fatalf("cached_tokens hot %d cold %d: want >0 and 0", hc, cc)
	}
	// The hot path prefilled only the new item: input − cached = the tool output's tokens.
	newTokens := usage(hot[1], "input_tokens") - hc
	if newTokens <= 0 || newTokens > 20 {
		t.Fatalf("hot path prefilled %d tokens for one short tool output", newTokens)
	}
	if hc != usage(hot[0], "input_tokens")+usage(hot[0], "output_tokens") && hc < usage(hot[0], "input_tokens") {
		t.Errorf("hot cached_tokens %d does not cover the parent's context", hc)
	}
}

// TestIdleChainsDoNotHitTheRolloutLimit: a public-shape chain that ended with an answer keeps
// its rollout suspended for a hot continuation, but such rollouts do not count against
// -max-suspended: the least recently used one is released (its continuation takes the cold
// path with the same context), so one connection can start any number of chains.
func TestIdleChainsDoNotHitTheRolloutLimit(t *testing.T) {
	f := newFixture(t, server.Options{Limits: session.Limits{MaxSuspended: 3}})
	c := f.dial(t)
	var first []wstest.Frame
	for i := range 10 {
		r := turn(t, c, create("chain "+strings.Repeat("x", i), map[string]any{"store": false}))
		if final(r).Type() != "response.completed" {
			t.Fatalf("create %d: %v", i, final(r))
		}
		if i == 0 {
			first = r
		}
	}
	cold0 := f.srv.Counters().Cold.Load()
	r := turn(t, c, create("and the first?", map[string]any{"store": false, "previous_response_id": respID(first)}))
	if !strings.Contains(answer(r), "chain ") || f.srv.Counters().Cold.Load()-cold0 != 1 {
		t.Fatalf("continuation of a released chain: %q (cold %d)", answer(r), f.srv.Counters().Cold.Load()-cold0)
	}
	// Rollouts waiting for tool output are not released: they count.
	c2 := f.dial(t)
	for range 3 {
		turn(t, c2, create("tools", map[string]any{"store": false, "tools": []any{shell}, "metadata": map[string]string{"sim.calls": "1"}}))
	}
	c2.Send(create("tools", map[string]any{"store": false, "tools": []any{shell}, "metadata": map[string]string{"sim.calls": "1"}}))
	c2.ExpectError(429, "rollout_limit_reached", "")
}

// TestPenaltiesAreHotPathSettings: presence_penalty and frequency_penalty reach the backend,
// so a continuation that changes one takes the cold path; one that repeats them (or leaves a
// default as it was) stays hot.
func TestPenaltiesAreHotPathSettings(t *testing.T) {
	f := newFixture(t, server.Options{})
	run := func(first, second map[string]any) {
		t.Helper()
		c := f.dial(t)
		settings := func(extra map[string]any) map[string]any {
			m := map[string]any{"store": false, "tools": []any{shell}}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		r1 := turn(t, c, create("Check the disk usage.", settings(first)))
		next := settings(second)
		next["previous_response_id"] = respID(r1)
		turn(t, c, create([]any{toolOutput(callIDs(r1)[0], "42% used")}, next))
	}
	for _, tc := range []struct {
		name          string
		first, second map[string]any
		hot           bool
	}{
		{"same penalties", map[string]any{"presence_penalty": 0.5, "frequency_penalty": -1}, map[string]any{"presence_penalty": 0.5, "frequency_penalty": -1}, true},
		{"0 is the default", map[string]any{"presence_penalty": 0}, nil, true},
		{"presence_penalty changed", map[string]any{"presence_penalty": 0.5}, map[string]any{"presence_penalty": 1}, false},
		{"frequency_penalty dropped", map[string]any{"frequency_penalty": 1.5}, nil, false},
	} {
		hot0, cold0 := f.srv.Counters().Hot.Load(), f.srv.Counters().Cold.Load()
		run(tc.first, tc.second)
		hot, cold := f.srv.Counters().Hot.Load()-hot0, f.srv.Counters().Cold.Load()-cold0
		if tc.hot && (hot != 1 || cold != 0) || !tc.hot && (hot != 0 || cold != 1) {
			t.Errorf("%s: hot %d, cold %d", tc.name, hot, cold)
		}
	}
}
