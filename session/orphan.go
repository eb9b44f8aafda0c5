package session

import "github.com/tetherd/tether/protocol"

// A rollout whose latest Response leaves the registry (evicted, or dropped by a failed
// continuation: dropEndedLocked) can no longer be reached on its connection, so it is ended
// (cancelOrphans). A parked rollout whose value is in the shared store too (rollout.inStore)
// must first claim that value back, so that it does not go on elsewhere after it ended here;
// when the store does not answer, the rollout is not left half here and half there, waiting
// for its suspend timeout with nothing able to reach it: it leaves the connection whole, to
// the store, as a connection that closes leaves it (forgetStoredLocked). Its client continues
// the evicted Response from there, hot, on any instance, once the store answers; otherwise the
// value expires with its suspend timeout.

// orphan is a rollout whose latest Response left the registry.
type orphan struct {
	key string // the rollout's registry key
	id  string // the Response that left: its client continues the rollout by it
}

// cancelOrphans ends the rollouts whose latest Response left the registry (queued by
// dropEndedLocked). Called, without c.mu, by every call that may evict.
func (c *Conn) cancelOrphans() {
	c.mu.Lock()
	list := c.orphans
	c.orphans = nil
	c.mu.Unlock()
	for _, o := range list {
		c.mu.Lock()
		h, ok := c.reg[o.key]
		live := ok && !h.final && !h.cancelled
		c.mu.Unlock()
		if live {
			c.settleOrphan(o, h, c.CancelQuietly(o.key, protocol.ReasonCancelled))
		}
	}
}

// settleOrphan handles err, what the cancel of orphan o's rollout h returned. Nothing is left
// to do when it was cancelled, had ended meanwhile, is being moved to the store by a drain or
// ended by a close, or was claimed by another instance (forgotten here already). A rollout
// whose value in the store could not be claimed back (store_unavailable; the store's guard
// counts the failure in tether_store_errors_total) is left to the store, with a warning naming
// the Response. Any other failure is logged with the Response's id.
func (c *Conn) settleOrphan(o orphan, h *rollout, err error) {
	if err == nil {
		return
	}
	perr, _ := protocol.AsError(err)
	code := ""
	if perr != nil {
		code = perr.Code
	}
	switch code {
	case protocol.CodeAlreadyCompleted, protocol.CodeShuttingDown, protocol.CodeResponseNotFound:
		return
	case protocol.CodeStoreUnavailable:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.inRegistryLocked(h) && h.parked != nil && h.inStore && !h.final && !h.moving {
			c.log.Warn("the rollout of an evicted response could not be ended: the store did not answer its claim; it is left to the store, where a continuation of the response resumes it until its suspend timeout",
				"response_id", o.id, "key", o.key)
			c.forgetStoredLocked(h)
			return
		}
	}
	c.log.Warn("the rollout of an evicted response could not be ended", "response_id", o.id, "key", o.key, "err", err.Error())
}
