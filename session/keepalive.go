package session

import (
	"time"

	"github.com/tetherd/tether/sampler"
)

// keepAlive watches the sampling rollout for silence: when its sink has sent nothing for
// interval, the sink sends a keepalive frame (sampler.Rollout.KeepAlive). A long prefill (tens of seconds at the sim's 65 tokens/s preset,
// or a real engine's) would otherwise look dead to clients that time out on idle streams.
// Suspended and queued rollouts get none: nothing is in flight for them.
func (c *Conn) keepAlive(interval time.Duration) {
	defer c.rollouts.Done()
	t := time.NewTicker(max(interval/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			if r := c.samplingRollout(); r != nil {
				r.KeepAlive(now, interval)
			}
		}
	}
}

// samplingRollout returns the rollout that holds the connection's sampling slot, or nil.
func (c *Conn) samplingRollout() *sampler.Rollout {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.reg {
		if h.state == stateSampling && h.r != nil {
			return h.r
		}
	}
	return nil
}
