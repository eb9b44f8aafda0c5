package session

import (
	"time"

	"github.com/tetherd/tether/sampler"
)

// keepAlive asks the sampling rollout, if any, for a keepalive: its sink sends one when it has
// sent nothing for interval (sampler.Rollout.KeepAlive). A long prefill (tens of seconds at
// the sim's 65 tokens/s preset, or a real engine's) would otherwise look dead to clients that
// time out on idle streams. Suspended and queued rollouts get none: nothing is in flight for
// them. Called by the watchdog a few times per interval.
//
// The ask runs in a goroutine of its own, one at a time per connection: a keepalive is a
// Write, which waits for the writers before it, and the watchdog that calls this must go on
// timing the write in progress. (With another lane's frames blocked on a peer that stopped
// reading, the keepalive of a rollout quiet in its model waited behind them, and the peer was
// never dropped for the write timeout.) An ask that finds the previous one still waiting
// does nothing.
func (c *Conn) keepAlive(now time.Time, interval time.Duration) {
	r := c.samplingRollout()
	if r == nil || !c.keeping.CompareAndSwap(false, true) {
		return
	}
	c.goroutines.Add(1)
	go func() {
		defer c.goroutines.Done()
		defer c.keeping.Store(false)
		r.KeepAlive(now, interval)
	}()
}

// samplingRollout returns the rollout that holds the connection's sampling slot, or nil.
func (c *Conn) samplingRollout() *sampler.Rollout {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.reg {
		if h.r != nil && h.r.State() == sampler.Sampling {
			return h.r
		}
	}
	return nil
}
