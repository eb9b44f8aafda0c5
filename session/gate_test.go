package session

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// holds reports whether tk holds the gate's slot now.
func holds(tk *ticket) bool {
	select {
	case <-tk.ready:
		return true
	default:
		return false
	}
}

// mustEnqueue takes a place in g's queue for a sampling turn.
func mustEnqueue(t *testing.T, g *gate) *ticket {
	t.Helper()
	tk, ok := g.enqueue()
	if !ok {
		t.Fatal("enqueue refused below the depth")
	}
	return tk
}

// queued is the number of tickets waiting in g's queue.
func queued(g *gate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// TestGateGrantsInFIFOOrder: the slot goes to the waiting tickets in the order they were
// enqueued, not in the order their Waits started, one at a time.
func TestGateGrantsInFIFOOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(8, nil)
		first := mustEnqueue(t, g)
		if !holds(first) {
			t.Fatal("the first ticket of an idle gate does not hold the slot")
		}
		tks := []*ticket{mustEnqueue(t, g), mustEnqueue(t, g), mustEnqueue(t, g), g.enqueueAlways()}
		var (
			mu     sync.Mutex
			order  []int
			inSlot int // tickets between their grant and their Release
			wg     sync.WaitGroup
		)
		for i := len(tks) - 1; i >= 0; i-- { // Waits start in reverse order
			wg.Go(func() {
				if err := tks[i].Wait(t.Context()); err != nil {
					t.Errorf("ticket %d: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				inSlot++
				if inSlot > 1 {
					t.Errorf("ticket %d holds the slot with another", i)
				}
				mu.Unlock()
				time.Sleep(time.Millisecond) // hold the slot a while (fake time)
				mu.Lock()
				inSlot--
				mu.Unlock()
				tks[i].Release()
			})
		}
		synctest.Wait()
		if len(order) != 0 || queued(g) != len(tks) {
			t.Fatalf("granted %v while the first ticket holds the slot (%d queued)", order, queued(g))
		}
		first.Release()
		wg.Wait()
		if want := []int{0, 1, 2, 3}; !slices.Equal(order, want) {
			t.Fatalf("grant order %v, want %v", order, want)
		}
		if tk := mustEnqueue(t, g); !holds(tk) {
			t.Fatal("the gate is not idle after every ticket was released")
		} else {
			tk.Release()
		}
	})
}

// TestGateDepthBound: enqueue refuses a sampling turn when depth tickets wait; enqueueAlways
// still queues (a rollout ending without the slot); a default depth applies for depth <= 0.
func TestGateDepthBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(2, nil)
		held := mustEnqueue(t, g)
		a, b := mustEnqueue(t, g), mustEnqueue(t, g)
		if tk, ok := g.enqueue(); ok || tk != nil {
			t.Fatalf("enqueue past the depth: %v %v", tk, ok)
		}
		always := g.enqueueAlways()
		if always == nil || holds(always) || queued(g) != 3 {
			t.Fatalf("enqueueAlways on a full queue: %v, %d queued", always, queued(g))
		}
		held.Release()
		if !holds(a) || holds(b) || holds(always) {
			t.Fatal("the head of the queue was not granted alone")
		}
		// The queue (b, always) is still full: enqueueAlways tickets count toward the depth.
		if _, ok := g.enqueue(); ok {
			t.Fatal("enqueue past the depth, counting an enqueueAlways ticket")
		}
		a.Release()
		c := mustEnqueue(t, g) // one place is free again
		for _, tk := range []*ticket{b, always, c} {
			if err := tk.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			tk.Release()
		}
		if d := newGate(0, nil); d.depth != DefaultQueueDepth {
			t.Fatalf("depth %d for 0, want DefaultQueueDepth %d", d.depth, DefaultQueueDepth)
		}
	})
}

// TestGateReleaseOfAWaitingTicket: a waiting ticket that is released leaves the queue and is
// never granted; a second Release of a ticket changes nothing.
func TestGateReleaseOfAWaitingTicket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(4, nil)
		held := mustEnqueue(t, g)
		a, b := mustEnqueue(t, g), mustEnqueue(t, g)
		a.Release()
		if queued(g) != 1 {
			t.Fatalf("%d queued after the release of a waiting ticket, want 1", queued(g))
		}
		held.Release()
		held.Release() // no-op: must not grant a second ticket
		if holds(a) || !holds(b) {
			t.Fatalf("after the holder's release: released ticket granted %v, next granted %v", holds(a), holds(b))
		}
		c := mustEnqueue(t, g)
		if holds(c) {
			t.Fatal("a second Release of the former holder freed the slot")
		}
		b.Release()
		if !holds(c) {
			t.Fatal("c not granted after b")
		}
		c.Release()
	})
}

// TestGateWaitEndsWithItsContext: a Wait whose context ends returns its error and leaves the
// queue; the tickets behind it move up.
func TestGateWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(4, nil)
		held := mustEnqueue(t, g)
		cancelled, timedOut, last := mustEnqueue(t, g), mustEnqueue(t, g), mustEnqueue(t, g)
		ctx, cancel := context.WithCancel(t.Context())
		errs := make(chan error, 2)
		go func() { errs <- cancelled.Wait(ctx) }()
		go func() {
			ctx, stop := context.WithTimeout(t.Context(), time.Second)
			defer stop()
			errs <- timedOut.Wait(ctx)
		}()
		synctest.Wait()
		cancel()
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait: %v", err)
		}
		time.Sleep(time.Second) // fake time: the other Wait's deadline passes
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timed-out Wait: %v", err)
		}
		if queued(g) != 1 {
			t.Fatalf("%d queued after two Waits ended, want 1", queued(g))
		}
		held.Release()
		if holds(cancelled) || holds(timedOut) || !holds(last) {
			t.Fatal("the slot did not skip the tickets whose Wait ended")
		}
		last.Release()
	})
}

// TestGateAdmission: a sampling ticket takes the server-wide admission after its slot, not
// while it waits for the slot; releaseAdmission gives the admission back but keeps the slot,
// and a later Wait takes it again; a ticket from enqueueAlways takes no admission; a Wait
// whose context ends while waiting for the admission frees the slot.
func TestGateAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		adm := NewAdmission(1)
		g1, g2 := newGate(4, adm), newGate(4, adm) // two connections
		t1 := mustEnqueue(t, g1)
		if err := t1.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if adm.Running.Load() != 1 {
			t.Fatalf("running %d after the first Wait, want 1", adm.Running.Load())
		}
		// A ticket waiting for its connection's slot does not wait for an admission.
		behind := mustEnqueue(t, g1)
		waited := make(chan error, 1)
		go func() { waited <- behind.Wait(t.Context()) }()
		synctest.Wait()
		if adm.Waiting.Load() != 0 {
			t.Fatalf("waiting for an admission %d while only the slot is awaited", adm.Waiting.Load())
		}
		// The other connection's ticket holds its slot at once and waits for the admission.
		t2 := mustEnqueue(t, g2)
		got2 := make(chan error, 1)
		go func() { got2 <- t2.Wait(t.Context()) }()
		synctest.Wait()
		if !holds(t2) || adm.Waiting.Load() != 1 || len(got2) != 0 {
			t.Fatalf("second connection: slot %v, waiting %d, returned %d", holds(t2), adm.Waiting.Load(), len(got2))
		}
		t1.releaseAdmission()
		if err := <-got2; err != nil {
			t.Fatal(err)
		}
		if adm.Running.Load() != 1 || adm.Waiting.Load() != 0 || holds(behind) {
			t.Fatalf("after releaseAdmission: running %d waiting %d; the slot must stay with t1 (next granted %v)",
				adm.Running.Load(), adm.Waiting.Load(), holds(behind))
		}
		t1.releaseAdmission() // no admission held: no-op
		// A later Wait of t1 takes an admission again, after t2 gives it back.
		again := make(chan error, 1)
		go func() { again <- t1.Wait(t.Context()) }()
		synctest.Wait()
		if len(again) != 0 {
			t.Fatal("t1's second Wait returned while t2 holds the only admission")
		}
		t2.Release()
		if err := <-again; err != nil {
			t.Fatal(err)
		}
		// A ticket from enqueueAlways on g2 needs no admission (t1 holds the only one).
		end := g2.enqueueAlways()
		if err := end.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if adm.Running.Load() != 1 {
			t.Fatalf("running %d: the enqueueAlways ticket took an admission", adm.Running.Load())
		}
		end.Release()
		// A Wait that ends while waiting for the admission frees its slot.
		t3 := mustEnqueue(t, g2)
		ctx, cancel := context.WithCancel(t.Context())
		got3 := make(chan error, 1)
		go func() { got3 <- t3.Wait(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-got3; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait cancelled during admission: %v", err)
		}
		if tk := mustEnqueue(t, g2); !holds(tk) {
			t.Fatal("the slot stayed taken after a Wait ended waiting for the admission")
		} else {
			tk.Release()
		}
		// t1's Release gives back both: behind gets the slot and the admission.
		t1.Release()
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
		if adm.Running.Load() != 1 {
			t.Fatalf("running %d after the handover, want 1", adm.Running.Load())
		}
		behind.Release()
		if adm.Running.Load() != 0 || adm.Waiting.Load() != 0 {
			t.Fatalf("after every release: running %d waiting %d", adm.Running.Load(), adm.Waiting.Load())
		}
	})
}
