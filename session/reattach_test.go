package session

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// TestDrainParksToTheStore: two connections share a store that keeps parked rollouts. A drain
// of the first, whose client opted in, parks its suspended rollout there (response.parked with
// the next sequence_number); an append on the second claims and continues it, hot, numbering
// going on; a cancel of a parked one on another connection claims it and ends it; an owner's
// rollout is not another owner's; a client that did not opt in sees the drain as before.
func TestDrainParksToTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory(0, 0)
		ma, mb := &Metrics{}, &Metrics{}
		a, ca, stopA := serve(t, Options{Parker: mem, Reattach: true, Limits: Limits{SuspendTimeout: time.Minute}, Metrics: ma, Owner: "k"})
		defer stopA()
		b, cb, stopB := serve(t, Options{Parker: mem, Metrics: mb, Owner: "k"})
		defer stopB()
		other, _, stopO := serve(t, Options{Parker: mem, Owner: "k2"})
		defer stopO()
		id, call, seq := createCalls(t, a, "2")
		id2, _, _ := createCalls(t, a, "2")

		go ca.Drain(protocol.ReasonServerShutdown)
		parked := map[string]float64{}
		for range 2 {
			f := a.next(t)
			if f["type"] != string(EventParked) {
				t.Fatalf("want response.parked, got %v", f)
			}
			parked[f["response_id"].(string)] = f["sequence_number"].(float64)
		}
		if parked[id] != seq+1 || len(parked) != 2 {
			t.Fatalf("parked %v: want %s at %v", parked, id, seq+1)
		}
		synctest.Wait()
		if ma.StoreParks.Load() != 2 || ma.Parked.Load() != 0 || ma.Suspended.Load() != 0 {
			t.Fatalf("A: %d parked to the store, %d parked, %d suspended", ma.StoreParks.Load(), ma.Parked.Load(), ma.Suspended.Load())
		}

		appendOutput(t, other, id, call)
		if f := other.next(t); f["type"] != "error" || f["error"].(map[string]any)["code"] != protocol.CodeResponseNotFound {
			t.Fatalf("another owner's append: %v", f)
		}
		appendOutput(t, b, id, call)
		fs := b.until(t, protocol.EventDone)
		for i, f := range fs {
			if f["sequence_number"].(float64) != seq+2+float64(i) {
				t.Fatalf("frame %d (%s): sequence_number %v", i, f["type"], f["sequence_number"])
			}
		}
		done := fs[len(fs)-1]
		if done["response_id"] != id {
			t.Fatalf("response.done of %v", done["response_id"])
		}
		if cached := usageOf(done)["input_tokens_details"].(map[string]any)["cached_tokens"].(float64); cached == 0 {
			t.Fatalf("not hot: %v", usageOf(done))
		}
		b.send(t, map[string]any{"type": "response.cancel", "response_id": id2})
		if f := b.next(t); f["type"] != string(protocol.EventIncomplete) || reason(f) != protocol.ReasonCancelled {
			t.Fatalf("cancel of a parked rollout: %v", f)
		}
		appendOutput(t, b, id, call) // claimed already: the live rollout refuses the old call
		if f := b.next(t); f["type"] != "error" {
			t.Fatalf("a second append of the same output: %v", f)
		}
		synctest.Wait()
		if mb.Claims.Load() != 2 {
			t.Fatalf("B claimed %d, want 2", mb.Claims.Load())
		}
		checkHeld(t, ca)
		checkHeld(t, cb)
	})
}

// TestDrainWithoutReattach: without the client's opt-in, or for a store:false Response
// without ParkUnstored, a drain ends the suspended rollout as before.
func TestDrainWithoutReattach(t *testing.T) {
	for _, o := range []Options{{Reattach: false}, {Reattach: true, Limits: Limits{ParkUnstored: false}}} {
		synctest.Test(t, func(t *testing.T) {
			o.Parker = store.NewMemory(0, 0)
			p, c, stop := serve(t, o)
			defer stop()
			stored := !o.Reattach
			p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "run the checks", "store": stored,
				"tools": []any{shellTool}, "metadata": map[string]string{"sim.calls": "2"}})
			p.until(t, protocol.EventDone)
			go c.Drain(protocol.ReasonServerShutdown)
			if f := p.next(t); f["type"] != string(protocol.EventIncomplete) || reason(f) != protocol.ReasonServerShutdown {
				t.Fatalf("want response.incomplete server_shutdown, got %v", f)
			}
		})
	}
}

// TestClaimedRolloutParksAgain: a rollout claimed from the store and resumed on a second
// instance keeps its suspend timeout, so that when that instance drains in turn, the rollout,
// suspended again, is parked to the store again (not ended), and a third instance resumes it.
func TestClaimedRolloutParksAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory(0, 0)
		opts := func() Options {
			return Options{Parker: mem, Reattach: true, Limits: Limits{SuspendTimeout: time.Minute}, Owner: "k"}
		}
		a, ca, stopA := serve(t, opts())
		defer stopA()
		b, cb, stopB := serve(t, opts())
		defer stopB()
		c, _, stopC := serve(t, opts())
		defer stopC()
		id, call, _ := createCalls(t, a, "3")
		go ca.Drain(protocol.ReasonServerShutdown)
		if f := a.next(t); f["type"] != string(EventParked) {
			t.Fatalf("A: want response.parked, got %v", f)
		}
		appendOutput(t, b, id, call)
		fs := b.until(t, protocol.EventDone)
		done := fs[len(fs)-1]
		call = done["pending_call_ids"].([]any)[0].(string)
		go cb.Drain(protocol.ReasonServerShutdown)
		if f := b.next(t); f["type"] != string(EventParked) || f["sequence_number"] != done["sequence_number"].(float64)+1 {
			t.Fatalf("B: want response.parked #%v, got %v", done["sequence_number"].(float64)+1, f)
		}
		appendOutput(t, c, id, call)
		if fs := c.until(t, protocol.EventDone); fs[len(fs)-1]["response_id"] != id {
			t.Fatalf("C: response.done of %v, want %s", fs[len(fs)-1]["response_id"], id)
		}
	})
}

// TestDrainParksARolloutResumedBeforeItParked: a drain asks a suspended rollout to park, and
// an append gets to the rollout first (the rollout continues; the request to park is spent).
// At its next suspension the drain asks again and parks it to the store, instead of waiting
// for the end of the grace and ending it. The race's outcome is set up directly: the
// registry entry says the drain asked, the rollout is live.
func TestDrainParksARolloutResumedBeforeItParked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory(0, 0)
		a, ca, stopA := serve(t, Options{
			Parker:   mem,
			Reattach: true,
			Limits: Limits{
				SuspendTimeout: time.Minute,
				ShutdownGrace:  time.Minute,
			},
			Owner: "k",
		})
		defer stopA()
		id, call, _ := createCalls(t, a, "3")
		ca.mu.Lock()
		ca.reg[id].parkAsked = true
		ca.mu.Unlock()
		appendOutput(t, a, id, call)
		fs := a.until(t, protocol.EventDone)
		start := time.Now()
		go ca.Drain(protocol.ReasonServerShutdown)
		f := a.next(t)
		if f["type"] != string(EventParked) || f["sequence_number"] != fs[len(fs)-1]["sequence_number"].(float64)+1 {
			t.Fatalf("want response.parked #%v, got %v", fs[len(fs)-1]["sequence_number"].(float64)+1, f)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("parked after %v, want at once", d)
		}
	})
}
