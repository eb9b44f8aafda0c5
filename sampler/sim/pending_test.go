package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

// TestPendingIsEveryOpenCall pins what the public shape's hot path relies on to skip the walk
// of a continuation's whole chain: at every suspension, the outputs of exactly the pending
// calls continue the suspension's context (protocol.CheckContinuation passes), and leaving
// any one of them out does not. Rollouts with parallel calls, several steps, messages between
// the outputs and a client's own call answered in the first input.
func TestPendingIsEveryOpenCall(t *testing.T) {
	for _, c := range []struct{ calls, parallel int }{{1, 1}, {4, 1}, {3, 3}, {5, 2}} {
		t.Run(fmt.Sprintf("calls=%d,parallel=%d", c.calls, c.parallel), func(t *testing.T) {
			rec := newRecorder()
			input := []protocol.Item{userMsg("inspect the repository"),
				{Type: protocol.ItemFunctionCall, CallID: "call_client", Name: "exec_command", Arguments: `{"cmd":"ls"}`},
				toolOutput("call_client", "README.md"), userMsg("go on")}
			if err := protocol.CheckContinuation(nil, input); err != nil {
				t.Fatal(err)
			}
			r := Start(context.Background(), Config{Model: NewSim(SimOptions{}), Sink: rec, Input: input,
				Settings: Settings{Tools: []protocol.Tool{execTool, weatherTool}, Metadata: map[string]string{
					MetaCalls: fmt.Sprint(c.calls), MetaParallel: fmt.Sprint(c.parallel)}}})
			defer func() { r.Cancel(""); r.Wait() }()
			for step := 0; ; step++ {
				var s Suspension
				select {
				case s = <-rec.suspended:
				case e := <-rec.ended:
					if step == 0 || e.Status != protocol.ResponseCompleted {
						t.Fatalf("ended after %d steps: %s %s", step, e.Status, e.Reason)
					}
					return
				case <-time.After(10 * time.Second):
					t.Fatal("no suspension")
				}
				if len(s.PendingCallIDs) == 0 {
					t.Fatalf("step %d: suspended with no pending call", step)
				}
				answer := append(outputs(s, fmt.Sprint("step", step)), userMsg("and then?"))
				if err := protocol.CheckContinuation(s.Context, answer); err != nil {
					t.Fatalf("step %d: the outputs of the pending calls do not continue the context: %v", step, err)
				}
				if err := protocol.CheckContinuation(s.Context, answer[1:]); err == nil {
					t.Fatalf("step %d: a continuation without the output of %s passed", step, s.PendingCallIDs[0])
				}
				if err := r.Resume(Resume{Input: answer[:len(answer)-1]}); err != nil { // a message would start a new turn
					t.Fatal(err)
				}
			}
		})
	}
}
