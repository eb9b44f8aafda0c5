package sampler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetherd/tether/protocol"
)

// script is a test backend: each step plays the next scripted action and records what the
// rollout fed it. It stands in for an engine only in this package's tests of the seam; the
// server's tests use the sim and real upstream servers.
type script struct {
	steps   []func(out Output) (StepResult, error)
	opened  atomic.Int32
	closed  atomic.Int32
	mu      sync.Mutex
	fed     []Step // copies of every step the sessions received
	prefill [][]protocol.Item
}

type scriptSession struct {
	s *script
	n int
}

func (s *script) Open(context.Context, RolloutInfo) (ModelSession, error) {
	s.opened.Add(1)
	return &scriptSession{s: s}, nil
}

func (ss *scriptSession) Prefill(_ context.Context, in []protocol.Item) error {
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	ss.s.prefill = append(ss.s.prefill, append([]protocol.Item(nil), in...))
	return nil
}

func (ss *scriptSession) Sample(_ context.Context, step *Step, out Output) (StepResult, error) {
	ss.s.mu.Lock()
	cp := *step
	cp.Output = append([]protocol.Item(nil), step.Output...)
	cp.Input = append([]protocol.Item(nil), step.Input...)
	ss.s.fed = append(ss.s.fed, cp)
	ss.s.mu.Unlock()
	i := ss.n
	ss.n++
	return ss.s.steps[i](out)
}

func (ss *scriptSession) Close() { ss.s.closed.Add(1) }

func call(name, id string) func(Output) (StepResult, error) {
	return func(out Output) (StepResult, error) {
		if err := out.Call(name, id); err != nil {
			return StepResult{}, err
		}
		return StepResult{InputTokens: 100, CachedTokens: 90, OutputTokens: 7}, out.Arguments(`{}`)
	}
}

func say(text string) func(Output) (StepResult, error) {
	return func(out Output) (StepResult, error) {
		return StepResult{InputTokens: 120, CachedTokens: 110, OutputTokens: 3}, out.Text(text)
	}
}

// sink records a rollout's suspensions and ending.
type sink struct {
	suspended chan Suspension
	ended     chan Ending
	events    int
}

func newSink() *sink {
	return &sink{suspended: make(chan Suspension, 8), ended: make(chan Ending, 1)}
}

func (s *sink) Started()                    {}
func (s *sink) Event(*protocol.Event) error { s.events++; return nil }
func (s *sink) Suspended(sp Suspension)     { s.suspended <- sp }
func (s *sink) Ended(e Ending)              { s.ended <- e }

func (s *sink) suspension(t *testing.T) Suspension {
	t.Helper()
	select {
	case sp := <-s.suspended:
		return sp
	case e := <-s.ended:
		t.Fatalf("ended %s %s %v", e.Status, e.Reason, e.Err)
	case <-time.After(10 * time.Second):
		t.Fatal("no suspension")
	}
	return Suspension{}
}

func (s *sink) ending(t *testing.T) Ending {
	t.Helper()
	select {
	case e := <-s.ended:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no ending")
	}
	return Ending{}
}

func user(text string) protocol.Item {
	return protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleUser,
		Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: text}}}
}

// TestSeamFeedsOnlyNewItems: the backend gets the chain once, then each step only the previous
// step's own items and the new input; usage is what the backend reported; Close runs once.
func TestSeamFeedsOnlyNewItems(t *testing.T) {
	m := &script{steps: []func(Output) (StepResult, error){call("f", "up_1"), call("f", "up_1"), say("done")}}
	s := newSink()
	hist := []protocol.Item{user("earlier")}
	r := Start(context.Background(), Config{Model: m, Sink: s, History: hist, Input: []protocol.Item{user("now")}})
	sp := s.suspension(t)
	if sp.PendingCallIDs[0] != "up_1" {
		t.Fatalf("the engine's call_id was not kept: %v", sp.PendingCallIDs)
	}
	if err := r.Resume(Resume{Input: []protocol.Item{toolOutput("up_1", "one")}}); err != nil {
		t.Fatal(err)
	}
	sp = s.suspension(t)
	if sp.PendingCallIDs[0] == "up_1" || len(sp.PendingCallIDs[0]) != len("call_")+32 {
		t.Fatalf("a reused engine call_id must be replaced: %v", sp.PendingCallIDs)
	}
	if err := r.Resume(Resume{Input: []protocol.Item{toolOutput(sp.PendingCallIDs[0], "two")}}); err != nil {
		t.Fatal(err)
	}
	e := s.ending(t)
	r.Wait()
	if e.Status != protocol.ResponseCompleted {
		t.Fatalf("ended %s", e.Status)
	}
	if m.opened.Load() != 1 || m.closed.Load() != 1 {
		t.Fatalf("opened %d closed %d", m.opened.Load(), m.closed.Load())
	}
	want := []struct{ out, in int }{{0, 2}, {1, 1}, {1, 1}}
	for i, st := range m.fed {
		if st.Index != i || len(st.Output) != want[i].out || len(st.Input) != want[i].in {
			t.Fatalf("step %d fed index %d, %d output items, %d input items", i, st.Index, len(st.Output), len(st.Input))
		}
	}
	if m.fed[1].Output[0].Type != protocol.ItemFunctionCall || m.fed[1].Input[0].Output != "one" || len(m.fed[2].Context) != 6 {
		t.Fatalf("step 1 fed %+v", m.fed[1])
	}
	u := e.Usage
	if u.InputTokens != 320 || u.InputTokensDetails.CachedTokens != 290 || u.OutputTokens != 17 || u.TotalTokens != 337 {
		t.Fatalf("usage %+v is not the sum of what the backend reported", u)
	}
}

// TestBackendPanic: a panic in Sample ends the rollout failed (server_error) with a
// *PanicError carrying the stack; the session is still closed.
func TestBackendPanic(t *testing.T) {
	m := &script{steps: []func(Output) (StepResult, error){func(out Output) (StepResult, error) {
		_ = out.Text("partial")
		panic("engine exploded")
	}}}
	s := newSink()
	r := Start(context.Background(), Config{Model: m, Sink: s, Input: []protocol.Item{user("x")}})
	e := s.ending(t)
	r.Wait()
	var pe *PanicError
	if e.Status != protocol.ResponseFailed || e.Error == nil || e.Error.Code != protocol.CodeServerError || !errors.As(e.Err, &pe) {
		t.Fatalf("ending %+v", e)
	}
	if pe.Value != "engine exploded" || len(pe.Stack) == 0 || m.closed.Load() != 1 {
		t.Fatalf("panic %v, stack %d bytes, closed %d", pe.Value, len(pe.Stack), m.closed.Load())
	}
	if len(e.Output) != 1 || e.Output[0].Status != protocol.StatusIncomplete {
		t.Fatalf("the open item was not closed incomplete: %+v", e.Output)
	}
}

// TestWarmUpPrefills: a warm-up hands the context to Prefill, and the first step after it
// carries only the continuation's input.
func TestWarmUpPrefills(t *testing.T) {
	m := &script{steps: []func(Output) (StepResult, error){say("hi")}}
	s := newSink()
	r := Start(context.Background(), Config{Model: m, Sink: s, Input: []protocol.Item{user("warm")}, StartSuspended: true, SuspendOnAnswer: true})
	s.suspension(t)
	if err := r.Resume(Resume{Input: []protocol.Item{user("go")}}); err != nil {
		t.Fatal(err)
	}
	s.suspension(t)
	r.Cancel("")
	s.ending(t)
	r.Wait()
	if len(m.prefill) != 1 || len(m.prefill[0]) != 1 || len(m.fed) != 1 || len(m.fed[0].Input) != 1 || m.fed[0].Input[0].Text() != "go" {
		t.Fatalf("prefill %v, fed %+v", m.prefill, m.fed)
	}
	if m.closed.Load() != 1 {
		t.Fatalf("closed %d", m.closed.Load())
	}
}

// discard is a Sink that counts events.
type discard struct{ events int }

func (d *discard) Started()                    {}
func (d *discard) Event(*protocol.Event) error { d.events++; return nil }
func (d *discard) Suspended(Suspension)        {}
func (d *discard) Ended(Ending)                {}

// TestEmitterAllocs guards the hot path: streaming a delta into an open item reuses the
// rollout's Event and allocates nothing beyond the text's amortised growth.
func TestEmitterAllocs(t *testing.T) {
	r := &Rollout{cfg: Config{Sink: &discard{}}, ctx: context.Background(), stepCtx: context.Background()}
	r.emit.r = r
	r.rng = newRNG()
	r.emit.reset()
	if err := r.emit.Text("start"); err != nil {
		t.Fatal(err)
	}
	r.emit.text.Grow(1 << 20)
	if n := testing.AllocsPerRun(1000, func() { _ = r.emit.Text(" word") }); n > 0 {
		t.Fatalf("%v allocations per text delta", n)
	}
}
