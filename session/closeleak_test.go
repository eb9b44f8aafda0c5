package session

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/sampler/sim"
	"github.com/tetherd/tether/session/store"
)

// noUnpark is the sim without sampler.Unparker: the backend of an instance that cannot reopen
// a model session another instance parked to the shared store.
type noUnpark struct{ sampler.Model }

// TestCloseUnsharesAParkedRollout: a store:true rollout that a drain parked to the shared store
// is claimed by a connection whose model cannot continue it: the append is answered
// server_error and the rollout stays parked there, its items in the server's live index
// (found by another connection of the owner). When that connection closes, its items leave
// the index (the other connection no longer finds them), the index's entries and the
// registry give their bytes back to the Budget (zero), and the key's quota slot and the
// parked gauge are released.
func TestCloseUnsharesAParkedRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := store.NewMemory(0, 0)
		budget := NewBudget(1<<30, 0)
		live := NewLiveItems(budget)
		keys := NewKeyLimit(8, "rollouts")
		mb := &Metrics{}
		a, ca, stopA := serve(t, Options{Parker: mem, Reattach: true, Limits: Limits{SuspendTimeout: time.Minute}, Owner: "k"})
		defer stopA()
		b, _, stopB := serve(t, Options{Parker: mem, Owner: "k", Model: noUnpark{sim.NewSim(sim.SimOptions{Speed: sim.SpeedInstant})},
			LiveItems: live, Budget: budget, Metrics: mb, KeyRollouts: keys, QuotaKey: "k"})
		_, cc, stopC := serve(t, Options{Owner: "k", LiveItems: live})
		defer stopC()

		a.send(t, map[string]any{"type": "response.create", "model": "sim", "tools": []any{shellTool},
			"metadata": map[string]string{"sim.calls": "2"}, "input": []any{map[string]any{"type": "message", "id": "msg_leak",
				"role": "user", "content": []any{map[string]any{"type": "input_text", "text": "run the checks"}}}}})
		fs := a.until(t, protocol.EventDone)
		id := fs[0]["response"].(map[string]any)["id"].(string)
		call := fs[len(fs)-1]["pending_call_ids"].([]any)[0].(string)
		go ca.Drain(protocol.ReasonServerShutdown)
		if f := a.next(t); f["type"] != string(EventParked) || f["response_id"] != id {
			t.Fatalf("want response.parked of %s, got %v", id, f)
		}
		synctest.Wait()

		appendOutput(t, b, id, call)
		f := b.next(t)
		if f["type"] != "error" || f["error"].(map[string]any)["code"] != protocol.CodeServerError {
			t.Fatalf("an append the model cannot continue: %v", f)
		}
		if got := cc.Items([]string{"msg_leak"}); len(got) != 1 {
			t.Fatalf("while the claiming connection is open another one finds %v", got)
		}
		if budget.InUse() == 0 || keys.Held("k") != 1 || mb.Parked.Load() != 1 {
			t.Fatalf("claimed: budget %d, key slots %d, parked %d", budget.InUse(), keys.Held("k"), mb.Parked.Load())
		}

		stopB()
		synctest.Wait()
		if got := cc.Items([]string{"msg_leak"}); len(got) != 0 {
			t.Fatalf("after the claiming connection closed another one still finds %v", got)
		}
		if n := live.Len(); n != 0 {
			t.Fatalf("%d ids left in the live index", n)
		}
		if n := budget.InUse(); n != 0 {
			t.Fatalf("the budget holds %d bytes after close", n)
		}
		if keys.Held("k") != 0 || mb.Parked.Load() != 0 {
			t.Fatalf("after close: key slots %d, parked %d", keys.Held("k"), mb.Parked.Load())
		}
	})
}
