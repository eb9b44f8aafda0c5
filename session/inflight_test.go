package session

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// TestInflightArrivalOrder: with one in-flight unit, lanes whose turns became ready in the
// order A, B, C sample in that order, whatever order their goroutines call Wait in.
func TestInflightArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newInflight(1)
		var tickets []*ticket
		for range 3 {
			g := newGate(4, nil)
			g.inflight = b
			tk, ok := g.enqueue()
			if !ok {
				t.Fatal("enqueue refused")
			}
			tickets = append(tickets, tk)
		}
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i := 2; i >= 0; i-- { // Wait is called in the reverse order
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := tickets[i].Wait(context.Background()); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				tickets[i].Release()
			}()
			synctest.Wait()
		}
		wg.Wait()
		if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
			t.Fatalf("in-flight grants %v, want the order the turns became ready [0 1 2]", order)
		}
	})
}

// TestInflightCancelledPlace: a turn that gives up its place (cancelled while waiting, or
// released before it waited) does not keep the unit from the next one.
func TestInflightCancelledPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newInflight(1)
		mk := func() *ticket {
			g := newGate(4, nil)
			g.inflight = b
			tk, _ := g.enqueue()
			return tk
		}
		a, c, d := mk(), mk(), mk()
		if err := a.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- c.Wait(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("a cancelled Wait succeeded")
		}
		a.Release()
		if err := d.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		d.Release()
		e := mk()
		e.Release() // reserved, never waited for
		f := mk()
		if err := f.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.Release()
		if b.free != 1 || len(b.queue) != 0 {
			t.Fatalf("the bound leaked: free %d, %d waiting", b.free, len(b.queue))
		}
	})
}
