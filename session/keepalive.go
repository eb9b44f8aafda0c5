package session

import (
	"time"

	"github.com/tetherd/tether/sampler"
)

// keepAlive sends a keepalive for each sampling rollout whose sink has sent nothing for
// interval (sampler.Rollout.KeepAlive): a long prefill (tens of seconds at the sim's 65
// tokens/s preset, or a real engine's) would otherwise look dead to clients that time out on
// idle streams. Suspended and queued rollouts get none: nothing is in flight for them. Called
// by the watchdog, a few times per interval, with the watchdog's own scratch slice.
//
// The watchdog only asks whether a keepalive is due (sampler.Rollout.KeepAliveDue, which
// never waits); the keepalives that are due are sent by a goroutine of their own, one at a
// time per connection: a keepalive is a Write, which waits for the writers before it, and the
// watchdog must go on timing the write in progress. (With another lane's frames blocked on a
// peer that stopped reading, the keepalive of a rollout quiet in its model waited behind them,
// and the peer was never dropped for the write timeout.) So a rollout that streams starts no
// goroutine at all, and a quiet one one per interval. A tick that finds the previous writer
// still waiting sends nothing.
func (c *Conn) keepAlive(now time.Time, interval time.Duration, sampling []*sampler.Rollout) []*sampler.Rollout {
	sampling = c.samplingRollouts(sampling[:0])
	var due []*sampler.Rollout
	for _, r := range sampling {
		if r.KeepAliveDue(now, interval) {
			due = append(due, r)
		}
	}
	clear(sampling) // the watchdog's scratch holds no rollout between ticks
	if len(due) == 0 || !c.keeping.CompareAndSwap(false, true) {
		return sampling
	}
	c.keepWriters.Add(1)
	c.goroutines.Add(1)
	go func() {
		defer c.goroutines.Done()
		defer c.keeping.Store(false)
		for _, r := range due {
			r.KeepAlive(now, interval)
		}
	}()
	return sampling
}

// samplingRollouts appends the rollouts that hold a lane's sampling slot to dst.
func (c *Conn) samplingRollouts(dst []*sampler.Rollout) []*sampler.Rollout {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.reg {
		if h.r != nil && h.r.State() == sampler.Sampling {
			dst = append(dst, h.r)
		}
	}
	return dst
}
