package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session"
)

// cancelled sends response.cancel of id on c and checks that the rollout ends cancelled there.
func cancelled(t *testing.T, c *wstest.Client, id string) {
	t.Helper()
	c.Send(map[string]any{"type": "response.cancel", "response_id": id})
	fs := c.Until("response.incomplete")
	if last := fs[len(fs)-1]; last.Str("response", "id") != id || last.Str("response", "incomplete_details", "reason") != "cancelled" {
		t.Fatalf("cancel of %s: %v", id, last)
	}
}

// TestCancelOfARolloutParkedToTheStore: a reattaching client's rollout that -park-after has
// written to a shared Redis, then cancelled, leaves nothing in Redis and cannot be resumed
// anywhere: cancelled on its own connection (the copy is claimed back before the rollout ends)
// and cancelled from another instance after its connection dropped (the claim of the cancel
// takes it). The drop itself leaves the copy, for the rest of the suspend timeout: that is
// what reattachment is for.
func TestCancelOfARolloutParkedToTheStore(t *testing.T) {
	start, rc := sharedRedis(t)
	a, aURL := start(Options{Limits: session.Limits{ParkAfter: 20 * time.Millisecond, ParkUnstored: true}})
	_, bURL := start(Options{})
	for _, stored := range []bool{true, false} {
		// Cancelled on its own connection.
		ca := dialAs(t, aURL, "", true)
		copies := a.Metrics().StoreCopies.Load()
		id, call, _ := suspendCalls(t, ca, stored)
		waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == copies+1 })
		if keys := parkedKeys(t, rc); len(keys) != 1 || !strings.HasSuffix(keys[0], ":"+id) {
			t.Fatalf("store %v: parked keys %v, want %s's", stored, keys, id)
		}
		cancelled(t, ca, id)
		if keys := parkedKeys(t, rc); len(keys) != 0 {
			t.Fatalf("store %v: cancelled on its connection, parked keys left in Redis: %v", stored, keys)
		}
		cb := dialAs(t, bURL, "", true)
		appendTo(cb, id, call)
		cb.ExpectError(http.StatusNotFound, "response_not_found", "response_id")

		// Its connection drops: the copy stays, with the rest of the suspend timeout.
		id, call, _ = suspendCalls(t, ca, stored)
		waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == copies+2 })
		ca.C.CloseNow()
		waitFor(t, func() bool { return a.Metrics().AppendConns.Load() == 0 && a.Metrics().Parked.Load() == 0 })
		keys := parkedKeys(t, rc)
		if len(keys) != 1 || !strings.HasSuffix(keys[0], ":"+id) {
			t.Fatalf("store %v: after the drop, parked keys %v, want %s's", stored, keys, id)
		}
		if ttl := rc.PTTL(context.Background(), keys[0]).Val(); ttl <= 0 || ttl > time.Minute {
			t.Fatalf("store %v: the copy's ttl is %v, want the rest of the suspend timeout", stored, ttl)
		}
		// Cancelled from another instance: the cancel claims it; nothing is left to resume.
		cancelled(t, cb, id)
		if keys := parkedKeys(t, rc); len(keys) != 0 {
			t.Fatalf("store %v: cancelled from B, parked keys left in Redis: %v", stored, keys)
		}
		cc := dialAs(t, aURL, "", true)
		appendTo(cc, id, call)
		cc.ExpectError(http.StatusNotFound, "response_not_found", "response_id")
		cc.C.CloseNow()
		cb.C.CloseNow()
	}
}

// TestCancelWhileTheStoreFails: a cancel of a rollout whose copy is in a shared Redis, while
// Redis does not answer within -store-timeout (CLIENT PAUSE of writes), is refused with 503
// store_unavailable and the rollout stays suspended, here and in Redis. It used to end here
// (response.failed, its Response not stored) while its copy stayed in Redis for the rest of the
// suspend timeout: once Redis answered, an append on another instance resumed it, with the
// sequence_number of the terminal event its client had already seen. Once Redis answers, the
// cancel goes through, nothing is left in Redis, and the rollout resumes nowhere.
func TestCancelWhileTheStoreFails(t *testing.T) {
	start, rc := sharedRedis(t)
	// The store timeout bounds both the park's write, which must succeed on a loaded machine,
	// and the paused cancel, which must fail within the client's 10 s read: 3 s is well inside
	// both (200 ms failed the park's write about once in a full suite run at a load of 10).
	a, aURL := start(Options{StoreTimeout: 3 * time.Second, Limits: session.Limits{ParkAfter: 20 * time.Millisecond}})
	_, bURL := start(Options{})
	ca := dialAs(t, aURL, "", true)
	id, call, _ := suspendCalls(t, ca, true)
	waitFor(t, func() bool { return a.Metrics().StoreCopies.Load() == 1 })
	ctx := context.Background()
	if err := rc.Do(ctx, "CLIENT", "PAUSE", "30000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	ca.Send(map[string]any{"type": "response.cancel", "response_id": id})
	ca.ExpectError(http.StatusServiceUnavailable, "store_unavailable", "")
	if err := rc.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	if keys := parkedKeys(t, rc); len(keys) != 1 || !strings.HasSuffix(keys[0], ":"+id) {
		t.Fatalf("after the refused cancel, parked keys %v, want %s's", keys, id)
	}
	if n := a.Metrics().Parked.Load(); n != 1 {
		t.Fatalf("after the refused cancel, A holds %d parked rollouts, want 1", n)
	}
	cancelled(t, ca, id)
	if keys := parkedKeys(t, rc); len(keys) != 0 {
		t.Fatalf("cancelled, parked keys left in Redis: %v", keys)
	}
	cb := dialAs(t, bURL, "", true)
	appendTo(cb, id, call)
	cb.ExpectError(http.StatusNotFound, "response_not_found", "response_id")
}

// TestCancelRacingTheEnd: a response.cancel sent while a response streams its last tokens is
// either its ending (response.incomplete, reason cancelled) or refused with 409
// response_already_completed right after the response's terminal event, never dropped: a
// cancel that reached the rollout after its model finished, before it settled on its ending,
// used to get no answer at all (about 1 in 100 here).
func TestCancelRacingTheEnd(t *testing.T) {
	_, url := testServer(t, Options{})
	c := dialAppend(t, url)
	cancelled, refused := 0, 0
	for i := range 200 {
		c.Send(map[string]any{"type": "response.create", "model": "sim", "input": fmt.Sprint("hi ", i),
			"metadata": map[string]string{"sim.answer_tokens": "20"}})
		id := c.Until("response.created")[0].Str("response", "id")
		c.Until("response.output_text.delta")
		c.Send(map[string]any{"type": "response.cancel", "response_id": id})
		fs := c.Until("response.completed", "response.incomplete", "error")
		switch last := fs[len(fs)-1]; last.Type() {
		case "error":
			t.Fatalf("turn %d: the cancel's error came before the terminal event: %v", i, last)
		case "response.incomplete":
			if r := last.Str("response", "incomplete_details", "reason"); r != "cancelled" {
				t.Fatalf("turn %d: incomplete for %q, want cancelled", i, r)
			}
			cancelled++
			continue
		}
		// Completed before the cancel took: its 409 is the next frame.
		if f := c.Next(); f.Type() != "error" || f.Str("error", "code") != "response_already_completed" {
			t.Fatalf("turn %d: completed, then %v; want the cancel's 409 response_already_completed", i, f)
		}
		refused++
	}
	t.Logf("cancelled %d, refused after completing %d", cancelled, refused)
}

// TestSecondCancelDoesNotStallTheConnection: a second response.cancel of a rollout whose first
// cancel is still waiting for its lane's turn (another rollout of the lane samples) does not
// hold up the connection's later frames: a cancel of the sampling rollout sent right after it
// still ends that rollout cancelled. The second cancel's 409 follows the first rollout's
// terminal event.
func TestSecondCancelDoesNotStallTheConnection(t *testing.T) {
	_, url := testServer(t, Options{Model: sim.NewSim(sim.SimOptions{Realtime: true})})
	c := dialAppend(t, url)
	a, _, _ := suspendCalls(t, c, false)
	c.Send(map[string]any{"type": "response.create", "model": "sim", "input": "a long answer",
		"metadata": map[string]string{"sim.answer_tokens": "2000", "sim.speed": "65"}})
	b := c.Until("response.created")[0].Str("response", "id")
	c.Until("response.output_text.delta")
	c.Send(map[string]any{"type": "response.cancel", "response_id": a})
	c.Send(map[string]any{"type": "response.cancel", "response_id": a})
	c.Send(map[string]any{"type": "response.cancel", "response_id": b})
	fs := c.Until("response.completed", "response.incomplete")
	if last := fs[len(fs)-1]; last.Str("response", "id") != b || last.Type() != "response.incomplete" {
		t.Fatalf("the sampling rollout %s ended %v, want cancelled", b, last)
	}
	fs = c.Until("response.incomplete")
	if last := fs[len(fs)-1]; last.Str("response", "id") != a || last.Str("response", "incomplete_details", "reason") != "cancelled" {
		t.Fatalf("the suspended rollout %s ended %v, want cancelled", a, last)
	}
	if f := c.Next(); f.Type() != "error" || f.Str("error", "code") != "response_already_completed" {
		t.Fatalf("after %s's terminal event: %v, want the second cancel's 409", a, f)
	}
}
