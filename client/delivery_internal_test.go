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
