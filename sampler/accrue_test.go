package sampler

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetherd/tether/protocol"
)

// countingBudget is a byte-bounded Budget (max 0: none) that counts its reservations.
type countingBudget struct {
	max      int64
	used     atomic.Int64
	reserves atomic.Int64 // TryReserve calls that fit
	grows    atomic.Int64 // Grow calls
}

func (b *countingBudget) TryReserve(n int64) bool {
	for {
		cur := b.used.Load()
		if b.max > 0 && cur+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(cur, cur+n) {
			b.reserves.Add(1)
			return true
		}
	}
}

func (b *countingBudget) Grow(n int64)    { b.used.Add(n); b.grows.Add(1) }
func (b *countingBudget) Release(n int64) { b.used.Add(-n) }

// TestStepOutputCountedInChunks: the text and arguments a step passes to its Output are
// counted in the rollout's Budget as they accrue (AccrueFactor bytes per byte, in whole
// AccrueChunks: one reservation per chunk, not per delta, the first counted with Grow), and
// given back once the step has ended, at its suspension and at the rollout's end.
func TestStepOutputCountedInChunks(t *testing.T) {
	const deltas, size = 40, 1 << 10 // 40 KiB of text and 1 KiB of arguments: 82 KiB counted, six chunks
	b := &countingBudget{}
	var seen []int64 // what the budget held after each delta, as the backend saw it
	var textBytes int64
	m := &script{steps: []func(Output) (StepResult, error){
		func(out Output) (StepResult, error) {
			for range deltas {
				if err := out.Text(strings.Repeat("t", size)); err != nil {
					return StepResult{}, err
				}
				textBytes += size
				seen = append(seen, b.used.Load())
			}
			if err := out.Call("f", ""); err != nil {
				return StepResult{}, err
			}
			return StepResult{}, out.Arguments(strings.Repeat("a", size))
		},
		say(strings.Repeat("z", 3*AccrueChunk)),
	}}
	s := newSink()
	r := Start(context.Background(), Config{Model: m, Sink: s, Input: []protocol.Item{user("x")}, Budget: b})
	sp := s.suspension(t)
	for i, held := range seen {
		accrued := int64(i+1) * size * AccrueFactor
		if held < accrued || held >= accrued+AccrueChunk || held%AccrueChunk != 0 {
			t.Fatalf("after delta %d (%d bytes counted at %d a byte) the budget held %d: want whole chunks of %d covering it",
				i, accrued, AccrueFactor, held, AccrueChunk)
		}
	}
	if want := ((textBytes+size)*AccrueFactor + AccrueChunk - 1) / AccrueChunk; b.grows.Load() != 1 || b.reserves.Load()+1 != want {
		t.Fatalf("%d reservations and %d grows for %d deltas, want one per chunk (%d), the first a grow",
			b.reserves.Load(), b.grows.Load(), deltas+1, want)
	}
	if b.used.Load() != 0 {
		t.Fatalf("suspended, the budget still holds %d bytes of the step (its items are the sink's to count)", b.used.Load())
	}
	if err := r.Resume(Resume{Input: []protocol.Item{toolOutput(sp.PendingCallIDs[0], "ok")}}); err != nil {
		t.Fatal(err)
	}
	e := s.ending(t)
	r.Wait()
	if e.Status != protocol.ResponseCompleted || b.used.Load() != 0 {
		t.Fatalf("ended %s; the budget holds %d", e.Status, b.used.Load())
	}
}

// TestStepOutputOverBudgetFails: a delta that does not fit in the Budget is not taken and
// fails the step as an upstream's stream that does not fit does (failed, server_error, the
// budget named), even when the backend ignores the error and goes on (every later delta is
// refused too); the open item ends incomplete and the step's reservation is given back.
func TestStepOutputOverBudgetFails(t *testing.T) {
	b := &countingBudget{max: 4 * AccrueChunk}
	var refused []error
	m := &script{steps: []func(Output) (StepResult, error){
		func(out Output) (StepResult, error) {
			for range 3 * AccrueChunk / 1024 { // 3 chunks of text: 6 counted
				if err := out.Text(strings.Repeat("t", 1024)); err != nil {
					refused = append(refused, err)
				}
			}
			return StepResult{OutputTokens: 7}, nil // a backend that swallowed the error
		},
	}}
	s := &eventSink{sink: newSink()}
	r := Start(context.Background(), Config{Model: m, Sink: s, Input: []protocol.Item{user("x")}, Budget: b})
	e := s.ending(t)
	r.Wait()
	var me *MemoryError
	if len(refused) == 0 || !errors.As(refused[0], &me) {
		t.Fatalf("no delta refused with a *MemoryError: %v", refused)
	}
	if e.Status != protocol.ResponseFailed || e.Error == nil || e.Error.Code != protocol.CodeServerError ||
		!strings.Contains(e.Error.Message, "memory budget (-max-memory)") || !strings.Contains(e.Error.Message, "the model's output") {
		t.Fatalf("ending %s, error %+v: want failed, server_error naming the memory budget", e.Status, e.Error)
	}
	fit := int(b.max / AccrueFactor) // the text bytes that fit
	if len(e.Output) != 1 || e.Output[0].Status != protocol.StatusIncomplete || len(e.Output[0].Text()) != fit || s.deltaBytes != fit {
		t.Fatalf("output %d items, text %d bytes, %d streamed: want one incomplete message of the %d bytes that fit",
			len(e.Output), len(e.Output[0].Text()), s.deltaBytes, fit)
	}
	if e.StepUsage.OutputTokens != 7 || b.used.Load() != 0 {
		t.Fatalf("step usage %+v; the budget holds %d", e.StepUsage, b.used.Load())
	}
	t.Logf("error: %s", e.Error.Message)
}

// eventSink is sink that also counts the bytes of the text deltas.
type eventSink struct {
	*sink
	deltaBytes int
}

func (s *eventSink) Event(ev *protocol.Event) error {
	if ev.Type == protocol.EventOutputTextDelta {
		s.deltaBytes += len(ev.Delta)
	}
	return s.sink.Event(ev)
}

// TestEmitterAllocsCounted is TestEmitterAllocs with a Budget: counting the text as it
// accrues allocates nothing.
func TestEmitterAllocsCounted(t *testing.T) {
	r := &Rollout{cfg: Config{Sink: &discard{}}, ctx: context.Background(), stepCtx: context.Background()}
	r.emit.r = r
	r.emit.acc.budget = &countingBudget{}
	r.rng = newRNG()
	r.emit.reset()
	if err := r.emit.Text("start"); err != nil {
		t.Fatal(err)
	}
	r.emit.text.Grow(1 << 20)
	if n := testing.AllocsPerRun(1000, func() { _ = r.emit.Text(" word") }); n > 0 {
		t.Fatalf("%v allocations per text delta", n)
	}
	r.emit.acc.release()
}

// TestStepFirstChunkCounted: a step's first chunk is counted whether it fits or not, so that a
// step that produces little completes even when the Budget is full (the budget passes its
// bound by that chunk while the step runs); a step that needs a second chunk then fails.
func TestStepFirstChunkCounted(t *testing.T) {
	b := &countingBudget{max: 1} // full: nothing fits
	var during int64
	short, long := strings.Repeat("s", AccrueChunk/AccrueFactor), strings.Repeat("l", AccrueChunk/AccrueFactor+1)
	m := &script{steps: []func(Output) (StepResult, error){
		func(out Output) (StepResult, error) {
			err := out.Text(short)
			during = b.used.Load()
			return StepResult{}, err
		},
		say(long),
	}}
	s := newSink()
	r := Start(context.Background(), Config{Model: m, Sink: s, Input: []protocol.Item{user("x")}, Budget: b, SuspendOnAnswer: true})
	s.suspension(t)
	if during != AccrueChunk || b.used.Load() != 0 {
		t.Fatalf("the short step held %d bytes of a full budget (want its first chunk, %d), %d after it", during, AccrueChunk, b.used.Load())
	}
	if err := r.Resume(Resume{Input: []protocol.Item{user("more")}}); err != nil {
		t.Fatal(err)
	}
	e := s.ending(t)
	r.Wait()
	if e.Status != protocol.ResponseFailed || e.Error == nil || !strings.Contains(e.Error.Message, "memory budget") || b.used.Load() != 0 {
		t.Fatalf("a step past its first chunk of a full budget ended %s %+v; the budget holds %d", e.Status, e.Error, b.used.Load())
	}
}
