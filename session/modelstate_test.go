package session

import (
	"testing"
	"testing/synctest"

	"github.com/tetherd/tether/protocol"
)

// modelState returns the model state and the own bytes (items and settings) the registry
// counts for rollout id.
func modelState(t *testing.T, c *Conn, id string) (model, own int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.reg[id]
	if !ok {
		t.Fatalf("rollout %s not in the registry", id)
	}
	return h.model, h.ownBytes()
}

// TestModelStateCounted: a suspended rollout's held bytes include its model session's state
// (the sim's rendered context and the tokens of the call it generated, 4 bytes a token and the
// slack of their slices: 4 × the step's input_tokens to 8 × its input and output tokens at a
// suspension), which grows
// with each turn and is counted in the Budget; -max-rollout-bytes still sees only items and
// settings; once the rollout has ended its model state is no longer counted.
func TestModelStateCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, b := &Metrics{}, NewBudget(1<<30, 0)
		p, c, stop := serve(t, Options{Metrics: m, Budget: b})
		defer stop()
		exact := func(when string) {
			t.Helper()
			checkHeld(t, c)
			if got, want := budgetHeld(b, c), heldBytes(c)+SuspendedLiveBytes*m.Suspended.Load(); got != want {
				t.Fatalf("%s: the Budget holds %d bytes, the registry %d", when, got, want)
			}
		}
		// Usage is cumulative on the append shape; a step's input_tokens is the context it saw.
		tokens := func(fs []map[string]any) (in, out int64) {
			u := usageOf(fs[len(fs)-1])
			i, _ := u["input_tokens"].(float64)
			o, _ := u["output_tokens"].(float64)
			return int64(i), int64(o)
		}
		p.send(t, map[string]any{"type": "response.create", "model": "sim", "input": "run the checks",
			"tools": []any{shellTool}, "metadata": map[string]string{"sim.calls": "2"}})
		fs := p.until(t, protocol.EventDone)
		synctest.Wait()
		id := fs[0]["response"].(map[string]any)["id"].(string)
		call := fs[len(fs)-1]["pending_call_ids"].([]any)[0].(string)
		first, firstOut := tokens(fs)
		model, own := modelState(t, c, id)
		if model < 4*first || model > 8*(first+firstOut) || own <= 0 || heldBytes(c) != model+own {
			t.Fatalf("suspended: model %d (want 4 × %d input tokens to 8 × those and %d output tokens), own %d, held %d",
				model, first, firstOut, own, heldBytes(c))
		}
		exact("first suspension")
		appendOutput(t, p, id, call)
		fs = p.until(t, protocol.EventDone)
		synctest.Wait()
		model2, own2 := modelState(t, c, id)
		in, out := tokens(fs)
		if n, o := in-first, out-firstOut; model2 < 4*n || model2 > 8*(n+o) || model2 <= model || own2 <= own {
			t.Fatalf("second suspension: model %d (want 4 × %d input tokens to 8 × those and %d output tokens, more than %d), own %d (was %d)",
				model2, n, o, model, own2, own)
		}
		exact("second suspension")
		call = fs[len(fs)-1]["pending_call_ids"].([]any)[0].(string)
		appendOutput(t, p, id, call)
		p.until(t, protocol.EventCompleted)
		synctest.Wait()
		if model, own := modelState(t, c, id); model != 0 || heldBytes(c) != own {
			t.Fatalf("ended: model %d still counted (held %d, own %d)", model, heldBytes(c), own)
		}
		exact("ended")
	})
}
