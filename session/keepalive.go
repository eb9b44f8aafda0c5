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
func (c *Conn) keepAlive(now time.Time, interval time.Duration) {
	if r := c.samplingRollout(); r != nil {
		r.KeepAlive(now, interval)
	}
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
