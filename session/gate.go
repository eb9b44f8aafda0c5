package session

import (
	"context"
	"sync"
	"sync/atomic"
)

// gate is one lane's sampling slot: at most one rollout of
// the lane samples at a time; the others wait in FIFO order, at most depth of them. A
// connection has one gate per lane (Conn.laneLocked); the default lane's is the connection's
// single FIFO of clients that never send stream_id.
type gate struct {
	depth    int
	adm      *Admission // the server-wide bound a sampling ticket also waits for; nil: none
	inflight *inflight  // the connection's bound on lanes sampling at once; nil: none

	mu    sync.Mutex // guards busy and queue
	busy  bool
	queue []*ticket
}

// ticket is one place in the gate's queue. It implements sampler.Ticket.
type ticket struct {
	g        *gate
	ready    chan struct{} // closed when the ticket holds the slot
	state    int           // guarded by g.mu
	sampling bool          // a sampling turn: Wait also takes the in-flight bound and an admission
	admitted atomic.Bool   // holds an admission
	place    *inflightReq  // guarded by g.mu: the turn's place in gate.inflight, reserved when it gets the slot
	inflight atomic.Bool   // holds a unit of gate.inflight
}

const (
	ticketWaiting = iota
	ticketHeld
	ticketReleased
)

func newGate(depth int, adm *Admission) *gate {
	if depth <= 0 {
		depth = DefaultQueueDepth
	}
	return &gate{depth: depth, adm: adm}
}

// enqueue takes a place in the queue for a sampling turn, or reports false when depth tickets
// already wait. Its Wait also waits for the server-wide admission.
func (g *gate) enqueue() (*ticket, bool) {
	return g.enqueueBounded(true, true)
}

// enqueueAlways takes a place in the queue even when it is full: a rollout that ends without
// the slot waits for it to send its terminal event (the queue then holds at most one such
// ticket per rollout).
func (g *gate) enqueueAlways() *ticket {
	t, _ := g.enqueueBounded(false, false)
	return t
}

func (g *gate) enqueueBounded(bounded, sampling bool) (*ticket, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := &ticket{g: g, ready: make(chan struct{}), sampling: sampling}
	if !g.busy {
		g.busy = true
		g.grantLocked(t)
		return t, true
	}
	if bounded && len(g.queue) >= g.depth {
		return nil, false
	}
	g.queue = append(g.queue, t)
	return t, true
}

// Wait blocks until the ticket holds the slot (and, for a sampling turn, a unit of the
// connection's in-flight bound, then an admission) or ctx ends.
func (t *ticket) Wait(ctx context.Context) error {
	if err := t.waitSlot(ctx); err != nil {
		return err
	}
	if !t.sampling {
		return nil
	}
	if b := t.g.inflight; b != nil && !t.inflight.Load() {
		t.g.mu.Lock()
		if t.place == nil { // a later turn on a ticket that gave its unit back
			t.place = b.reserve()
		}
		place := t.place
		t.g.mu.Unlock()
		if err := place.wait(ctx); err != nil {
			t.Release()
			return err
		}
		t.inflight.Store(true)
	}
	if t.g.adm == nil || t.admitted.Load() {
		return nil
	}
	if err := t.g.adm.acquire(ctx); err != nil {
		t.Release()
		return err
	}
	t.admitted.Store(true)
	return nil
}

func (t *ticket) waitSlot(ctx context.Context) error {
	select {
	case <-t.ready:
		return nil
	default:
	}
	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
		t.Release()
		return ctx.Err()
	}
}

// releaseAdmission gives back the server-wide admission but keeps the connection's slot: the
// sampling step is over, and what follows (the adapter's store write, the terminal event)
// must not hold other connections' sampling. A later Wait takes an admission again.
func (t *ticket) releaseAdmission() {
	if t == nil {
		return
	}
	if t.admitted.CompareAndSwap(true, false) {
		t.g.adm.release()
	}
	if t.inflight.CompareAndSwap(true, false) {
		t.g.mu.Lock()
		place := t.place
		t.place = nil
		t.g.mu.Unlock()
		place.done()
	}
}

// Release gives the slot to the next ticket, or leaves the queue if still waiting.
func (t *ticket) Release() {
	g := t.g
	t.releaseAdmission()
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.place != nil { // reserved, never waited for: give the place up
		t.place.done()
		t.place = nil
	}
	switch t.state {
	case ticketWaiting:
		for i, q := range g.queue {
			if q == t {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				break
			}
		}
	case ticketHeld:
		g.grantNextLocked()
	}
	t.state = ticketReleased
}

func (g *gate) grantNextLocked() {
	if len(g.queue) == 0 {
		g.busy = false
		return
	}
	next := g.queue[0]
	g.queue[0] = nil
	g.queue = g.queue[1:]
	g.grantLocked(next)
}

// grantLocked gives t the slot; a sampling turn also reserves its place in the connection's
// in-flight bound now, so that lanes get it in the order their turns became ready.
func (g *gate) grantLocked(t *ticket) {
	t.state = ticketHeld
	if t.sampling && g.inflight != nil {
		t.place = g.inflight.reserve()
	}
	close(t.ready)
}
