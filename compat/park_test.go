package compat_test

import (
	"testing"
	"time"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

// waitFor polls cond (a state of the server) until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestPublicRolloutParksAndResumesHot: over a real WebSocket, a public-shape rollout
// suspended at a tool call, and again behind an answer, parks (-park-after); a create with
// previous_response_id of its latest segment continues it from the parked state on the hot
// path: counted hot, the same usage (cached_tokens) and context as a rollout that stayed live,
// sequence_number and output_index from 0 per Response.
func TestPublicRolloutParksAndResumesHot(t *testing.T) {
	parked := newFixture(t, server.Options{Limits: session.Limits{ParkAfter: 10 * time.Millisecond}})
	live := newFixture(t, server.Options{})
	m := parked.srv.Metrics()
	chain := func(f *fixture, park bool) [][]wstest.Frame {
		c := f.dial(t)
		opts := map[string]any{"store": false, "tools": []any{shell}}
		r1 := turn(t, c, create("Check the disk usage.", opts))
		wait := func(n int64) {
			if park {
				waitFor(t, "the rollout to park", func() bool { return m.Parks.Load() == n && m.Parked.Load() == 1 })
			}
		}
		wait(1)
		o2 := map[string]any{"store": false, "tools": []any{shell}, "previous_response_id": respID(r1)}
		r2 := turn(t, c, create([]any{toolOutput(callIDs(r1)[0], "42% used")}, o2))
		wait(2)
		o3 := map[string]any{"store": false, "tools": []any{shell}, "previous_response_id": respID(r2)}
		r3 := turn(t, c, create([]any{userMsg("And the inodes?")}, o3))
		return [][]wstest.Frame{r1, r2, r3}
	}
	hot0 := parked.srv.Counters().Hot.Load()
	got, want := chain(parked, true), chain(live, false)
	if n := parked.srv.Counters().Hot.Load() - hot0; n != 2 {
		t.Fatalf("%d hot continuations, want 2", n)
	}
	if m.Unparks.Load() != 2 {
		t.Fatalf("%d unparks, want 2", m.Unparks.Load())
	}
	for i := 1; i < 3; i++ {
		u, lu := string(mustJSON(t, final(got[i]).Get("response", "usage"))), string(mustJSON(t, final(want[i]).Get("response", "usage")))
		if u != lu {
			t.Fatalf("turn %d: usage from parked %s, live %s", i+1, u, lu)
		}
		if usage(got[i], "input_tokens_details", "cached_tokens") == 0 {
			t.Fatalf("turn %d not hot: %s", i+1, u)
		}
		for j, f := range got[i] {
			if n, _ := f.Int("sequence_number"); n != j {
				t.Fatalf("turn %d frame %d (%s): sequence_number %d", i+1, j, f.Str("type"), n)
			}
			if f.Str("type") == "response.output_item.added" {
				if n, _ := f.Int("output_index"); n != 0 {
					t.Fatalf("turn %d: output_index %d, want 0", i+1, n)
				}
			}
		}
	}
	if a, b := fingerprint(t, got[1]), fingerprint(t, want[1]); a != b {
		t.Fatalf("context from parked %s, live %s", a, b)
	}
}

// TestRejectedContinuationOfAParkedRollout: a continuation of the latest segment of a parked
// rollout whose input does not continue its chain is answered (tool_call_not_found) and ends
// that rollout, which has to be continued from parked to end: the connection goes on serving
// (the parent's eviction ends its rollout outside the registry's lock).
func TestRejectedContinuationOfAParkedRollout(t *testing.T) {
	f := newFixture(t, server.Options{Limits: session.Limits{ParkAfter: 10 * time.Millisecond}})
	m := f.srv.Metrics()
	c := f.dial(t)
	opts := map[string]any{"store": false, "tools": []any{shell}}
	r1 := turn(t, c, create("Check the disk usage.", opts))
	waitFor(t, "the rollout to park", func() bool { return m.Parked.Load() == 1 })
	c.Send(create([]any{toolOutput("call_nope", "42% used")}, map[string]any{"store": false, "tools": []any{shell}, "previous_response_id": respID(r1)}))
	c.ExpectError(400, "tool_call_not_found", "input")
	waitFor(t, "the parked rollout to end", func() bool { return m.Parked.Load() == 0 && m.Unparks.Load() == 1 })
	if fs := turn(t, c, create("Hello.", map[string]any{"store": false})); fs[len(fs)-1].Str("type") != "response.completed" {
		t.Fatalf("after the rejected continuation: %v", fs[len(fs)-1])
	}
}
