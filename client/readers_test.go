package client_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
)

// TestTwoEventReaders: two goroutines ranging over one rollout's Events at once (a misuse)
// share its events, each event going to one of them, and both stop at the suspension: neither
// waits for a wake-up that the other took.
func TestTwoEventReaders(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		for i := range 20 {
			r, err := c.Start(ctx, twoCalls("two readers"))
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var (
				mu   sync.Mutex
				seqs []int
				wg   sync.WaitGroup
			)
			for range 2 {
				wg.Go(func() {
					for ev, err := range r.Events(rctx) {
						if err != nil {
							t.Errorf("try %d: a reader: %v", i, err)
							return
						}
						mu.Lock()
						seqs = append(seqs, ev.SequenceNumber)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			cancel()
			if t.Failed() {
				return
			}
			slices.Sort(seqs)
			for j, n := range seqs {
				if n != j {
					t.Fatalf("try %d: sequence numbers %v: each event once, from 0", i, seqs)
				}
			}
			if r.Suspension() == nil {
				t.Fatalf("try %d: the readers stopped before the suspension", i)
			}
			if err := r.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
			for _, err := range r.Events(ctx) {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
