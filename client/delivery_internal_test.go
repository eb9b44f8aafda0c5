package client

import (
	"context"
	"testing"
)

// BenchmarkEventDelivery measures the delivery of one event from the link's reader (push,
// under r.mu) to one reader ranging over Events, on two goroutines as in use: one op is one
// event. Decoding the frame is not part of it.
func BenchmarkEventDelivery(b *testing.B) {
	r := benchRollout()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for range b.N - 1 {
			r.mu.Lock()
			r.push(Event{Type: "response.output_text.delta", Delta: "x"}, nil)
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.end(Event{Type: "response.completed"}, &Response{Status: "completed"})
		r.mu.Unlock()
	}()
	n := 0
	for _, err := range r.Events(ctx) {
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	if n != b.N {
		b.Fatalf("%d events, want %d", n, b.N)
	}
}

// BenchmarkEventDeliveryInTurn: the reader takes each event before the next is pushed (a
// reader that keeps up), so the queue is empty at every push.
func BenchmarkEventDeliveryInTurn(b *testing.B) {
	r := benchRollout()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r.mu.Lock()
		r.push(Event{Type: "response.output_text.delta", Delta: "x"}, nil)
		r.mu.Unlock()
		if res, ok := r.next(ctx); !ok || res.err != nil {
			b.Fatalf("next: %v %v", ok, res.err)
		}
	}
}

// TestEventDeliveryAllocatesNothing: an event pushed for a reader that keeps up reaches it
// without an allocation (the wake-up and the queue reuse what the rollout holds).
func TestEventDeliveryAllocatesNothing(t *testing.T) {
	r := benchRollout()
	ctx := context.Background()
	ev := Event{Type: "response.output_text.delta", Delta: "x"}
	allocs := testing.AllocsPerRun(1000, func() {
		r.mu.Lock()
		r.push(ev, nil)
		r.mu.Unlock()
		if res, ok := r.next(ctx); !ok || res.err != nil {
			t.Fatalf("next: %v %v", ok, res.err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per event, want 0", allocs)
	}
}

// benchRollout is a rollout that samples, with no connection: push and next only.
func benchRollout() *Rollout { return &Rollout{state: stSampling, notify: make(chan struct{}, 1)} }
