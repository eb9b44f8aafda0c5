package session

import (
	"slices"
	"sync"
	"time"

	"github.com/tetherd/tether/sampler"
)

// This file parks suspended rollouts under memory pressure: a live suspended rollout holds a
// goroutine and its sampler state besides its items, and is charged SuspendedLiveBytes in the
// Budget for them; a parked one holds one value. When a create or append does not fit in the
// Budget, the suspended live rollouts of every connection sharing it are parked, the longest
// suspended first, until their charges cover what is missing, and the create or append is
// tried again once.

// SuspendedLiveBytes is what Budget charges for a suspended rollout that is live (its
// goroutine waits), in bytes, besides its items and settings: its goroutine's stack and the
// sampler's and model session's state. tether soak -density measures about 17 KB per live
// suspended rollout against about 3 KB per parked one (small contexts, the sim). Parking the
// rollout (Limits.ParkAfter, memory pressure, drain) gives the charge back.
const SuspendedLiveBytes = 16 << 10

// pressureWait bounds how long a create or append that did not fit waits for the rollouts it
// asked to park (one may be resumed instead, and then does not park).
const pressureWait = 250 * time.Millisecond

// relief is the Budget's part in pressure parking: the connections sharing it.
type relief struct {
	mu    sync.Mutex // guards conns
	conns map[*Conn]struct{}
}

// join registers c, whose rollouts may be parked to make room in b (NewConn).
func (b *Budget) join(c *Conn) {
	if b == nil {
		return
	}
	b.relief.mu.Lock()
	if b.relief.conns == nil {
		b.relief.conns = make(map[*Conn]struct{})
	}
	b.relief.conns[c] = struct{}{}
	b.relief.mu.Unlock()
}

// leave unregisters c (Close).
func (b *Budget) leave(c *Conn) {
	if b == nil {
		return
	}
	b.relief.mu.Lock()
	delete(b.relief.conns, c)
	b.relief.mu.Unlock()
}

// candidate is a suspended live rollout that pressure may park.
type candidate struct {
	c     *Conn
	h     *rollout
	r     *sampler.Rollout
	since time.Time
}

// relieve parks suspended live rollouts of the connections sharing b, the longest suspended
// first, until their charges (SuspendedLiveBytes each) cover need bytes, and waits (at most
// pressureWait) until they have parked. It reports whether any parked. Call it without any
// connection's mu held.
func (b *Budget) relieve(need int64) bool {
	if b == nil || b.max == 0 || need <= 0 {
		return false
	}
	b.relief.mu.Lock()
	conns := make([]*Conn, 0, len(b.relief.conns))
	for c := range b.relief.conns {
		conns = append(conns, c)
	}
	b.relief.mu.Unlock()
	var cands []candidate
	for _, c := range conns {
		c.mu.Lock()
		for _, h := range c.reg {
			if h.parkable && h.r != nil && !h.cancelled && !h.moving && !h.pressured && h.r.State() == sampler.Suspended {
				cands = append(cands, candidate{c, h, h.r, h.suspendedAt})
			}
		}
		c.mu.Unlock()
	}
	slices.SortFunc(cands, func(a, b candidate) int { return a.since.Compare(b.since) })
	var asked []*sampler.Rollout
	for _, cd := range cands {
		if need <= 0 {
			break
		}
		cd.c.mu.Lock()
		ok := cd.h.r == cd.r && !cd.h.cancelled && !cd.h.moving && !cd.c.closing && !cd.c.draining
		if ok {
			cd.h.pressured = true
			ok = cd.r.Park() == nil
			cd.h.pressured = ok
		}
		cd.c.mu.Unlock()
		if ok {
			asked = append(asked, cd.r)
			need -= SuspendedLiveBytes
		}
	}
	wait := time.NewTimer(pressureWait)
	defer wait.Stop()
	parked := false
	for _, r := range asked {
		select {
		case <-r.Done():
			parked = parked || r.State() == sampler.Parked
		case <-wait.C:
			return parked
		}
	}
	return parked
}

// deficit is how many bytes over b's bound a reservation of add more would be (≤ 0: it fits).
func (b *Budget) deficit(add int64) int64 {
	if b == nil || b.max == 0 {
		return 0
	}
	return b.inUse.Load() + add - b.max
}

// chargeLive counts SuspendedLiveBytes in the Budget as a rollout becomes, or stops being,
// suspended and live (Conn.stateChanged): memory that exists, counted whether it fits or not.
func (c *Conn) chargeLive(from, to sampler.State) {
	switch {
	case to == sampler.Suspended && from != sampler.Suspended:
		c.opts.Budget.Grow(SuspendedLiveBytes)
	case from == sampler.Suspended && to != sampler.Suspended:
		c.opts.Budget.Grow(-SuspendedLiveBytes)
	}
}
