package session

import (
	"testing"
	"testing/synctest"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
)

// TestSnapshot follows one append-shape rollout through two suspensions and its end.
func TestSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, c, stop := serve(t, Options{})
		defer stop()
		if s := c.Snapshot(); s.ID == "" || s.Opened.IsZero() || len(s.Rollouts) != 0 || s.Ended != 0 {
			t.Fatalf("new connection %+v", s)
		}
		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "hi", "tools": []any{shellTool},
			"metadata": map[string]string{"sim.calls": "2"}})
		fs := p.until(t, protocol.EventDone)
		id := fs[0]["response"].(map[string]any)["id"].(string)
		r := only(t, c.Snapshot())
		if r.Key != id || r.State != "suspended" || r.Turns != 1 || r.Usage.InputTokens == 0 || r.ContextTokens == 0 || r.Started.IsZero() {
			t.Fatalf("after turn 1: %+v", r)
		}
		first := r
		for turn := 2; turn <= 3; turn++ {
			call := fs[len(fs)-1]["pending_call_ids"].([]any)[0].(string)
			p.send(t, map[string]any{"type": "response.append", "response_id": id,
				"input": []any{map[string]any{"type": "function_call_output", "call_id": call, "output": "ok"}}})
			if turn == 3 {
				break
			}
			fs = p.until(t, protocol.EventDone)
			r = only(t, c.Snapshot())
			if r.State != "suspended" || r.Turns != 2 || r.Usage.InputTokens <= first.Usage.InputTokens || r.ContextTokens <= first.ContextTokens {
				t.Fatalf("after turn 2: %+v (turn 1 %+v)", r, first)
			}
		}
		p.until(t, protocol.EventCompleted)
		if s := c.Snapshot(); len(s.Rollouts) != 0 || s.Ended != 1 {
			t.Fatalf("after the end: %+v", s)
		}
	})
}

func only(t *testing.T, s ConnSnapshot) RolloutSnapshot {
	t.Helper()
	if len(s.Rollouts) != 1 {
		t.Fatalf("%d live rollouts, want 1: %+v", len(s.Rollouts), s)
	}
	return s.Rollouts[0]
}

// TestSnapshotSamplingAndQueued: while one rollout samples (the sim sleeps on the bubble's
// clock), a second one waits for the slot and shows as queued.
func TestSnapshotSamplingAndQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, c, stop := serve(t, Options{Model: sim.NewSim(sim.SimOptions{Speed: sim.Speed65, Realtime: true})})
		defer stop()
		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "first"})
		p.until(t, protocol.EventInProgress)
		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "second"})
		synctest.Wait()
		s := c.Snapshot()
		if len(s.Rollouts) != 2 || s.Rollouts[0].State != "sampling" || s.Rollouts[1].State != "queued" {
			t.Fatalf("snapshot %+v", s)
		}
		p.until(t, protocol.EventCompleted)
		p.until(t, protocol.EventCompleted)
	})
}
