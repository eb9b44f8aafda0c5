package session

import (
	"context"
	"sync"
)

// inflight is a connection's bound on lanes sampling at once (Limits.MaxInflight), granted
// in the order the lanes' turns became ready: a turn reserves its place when its lane's slot
// is granted (under the lane's lock, in the order creates and appends arrived or lanes freed),
// not when its rollout's goroutine happens to run, so a lane never waits behind a lane that
// became ready after it.
type inflight struct {
	mu    sync.Mutex
	free  int
	queue []*inflightReq
}

// inflightReq is one turn's place for a unit of the bound.
type inflightReq struct {
	b     *inflight
	ready chan struct{} // closed when the unit is granted
	state int           // guarded by b.mu: reqWaiting, reqGranted or reqDone
}

const (
	reqWaiting = iota
	reqGranted
	reqDone
)

func newInflight(n int) *inflight { return &inflight{free: n} }

// reserve takes a place in the queue, or the unit at once when one is free and nobody waits.
func (b *inflight) reserve() *inflightReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := &inflightReq{b: b, ready: make(chan struct{})}
	if b.free > 0 && len(b.queue) == 0 {
		b.free--
		r.state = reqGranted
		close(r.ready)
		return r
	}
	b.queue = append(b.queue, r)
	return r
}

// wait blocks until the unit is granted or ctx ends (then the place is given up).
func (r *inflightReq) wait(ctx context.Context) error {
	select {
	case <-r.ready:
		return nil
	case <-ctx.Done():
		r.done()
		return ctx.Err()
	}
}

// done gives the unit back (to the longest waiting place), or leaves the queue.
func (r *inflightReq) done() {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch r.state {
	case reqWaiting:
		for i, q := range b.queue {
			if q == r {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				break
			}
		}
	case reqGranted:
		if len(b.queue) > 0 {
			next := b.queue[0]
			b.queue[0] = nil
			b.queue = b.queue[1:]
			next.state = reqGranted
			close(next.ready)
		} else {
			b.free++
		}
	}
	r.state = reqDone
}
