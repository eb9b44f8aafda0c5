package session

import (
	"net/http"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// The bytes a connection holds (its registry's rollout.bytes: items and settings, and its kept
// Responses' estimates) are counted in Options.Budget, server-wide, and bounded per connection
// by connBytes. Every change of rollout.bytes goes through registerLocked, growLocked or
// resizeLocked, every removal of a rollout from the registry through dropLocked (of a kept
// Response, dropEndedLocked): they keep Conn.held, the registry's sum, and Conn.count, the
// entries Limits.CacheResponses bounds, so that eviction never walks the registry.

// connBytes is the per-connection bound on held bytes: the larger of CacheBytes and
// MaxRolloutBytes, so that one rollout can always reach MaxRolloutBytes.
func (o *Options) connBytes() int64 { return max(o.CacheBytes, o.MaxRolloutBytes) }

// heldLocked is the sum of the registry's bytes.
func (c *Conn) heldLocked() int64 { return c.held }

// registerLocked adds h, holding h.bytes (already reserved), to the registry.
func (c *Conn) registerLocked(h *rollout) {
	c.reg[h.key] = h
	c.held += h.bytes
	if h.counted {
		c.count++
	}
}

// growLocked adds d (reserved or released by the caller) to h.bytes.
func (c *Conn) growLocked(h *rollout, d int64) {
	h.bytes += d
	if c.inRegistryLocked(h) {
		c.held += d
	}
}

// inRegistryLocked reports whether h is in the registry (a rollout dropped meanwhile is not
// counted in held).
func (c *Conn) inRegistryLocked(h *rollout) bool {
	cur, ok := c.reg[h.key]
	return ok && cur == h
}

// reserveLocked admits add more held bytes: ended entries are evicted (least recently used
// first, the newest too: live work comes first; not counted in Metrics.Evictions) to keep the
// connection within connBytes (a kept Response that goes orphans its rollout: the caller calls
// cancelOrphans once it has released c.mu), and add is reserved in the server's
// Budget. Errors: rollout_limit_reached (429) when the connection's live rollouts alone hold
// too much, server_overloaded (503) when the server's budget is in use.
func (c *Conn) reserveLocked(add int64) error {
	limit := c.opts.connBytes()
	held := c.heldLocked()
	for held+add > limit {
		key, e, ok := c.ended.Oldest()
		if !ok {
			return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeRolloutLimit, "",
				"This connection's live rollouts hold about %d bytes; %d more would exceed its limit of %d: finish or cancel one first.", held, add, limit)
		}
		held -= e.bytes()
		c.dropEndedLocked(key, e)
	}
	if !c.opts.Budget.TryReserve(add) {
		return BudgetFullError("this rollout's new items")
	}
	return nil
}

// resizeLocked sets h.bytes to n, counting the change in the Budget.
func (c *Conn) resizeLocked(h *rollout, n int64) {
	c.opts.Budget.Grow(n - h.bytes)
	c.growLocked(h, n-h.bytes)
}

// dropLocked removes h from the registry and returns its bytes to the Budget. A kept Response
// under h's key (the public shape's first Response of the rollout) stays.
func (c *Conn) dropLocked(h *rollout) {
	c.unshareLocked(h)
	delete(c.reg, h.key)
	if e, ok := c.ended.Peek(h.key); ok && e.h == h {
		c.ended.Remove(h.key)
	}
	c.opts.Budget.Release(h.bytes)
	c.held -= h.bytes
	h.bytes = 0
	if h.counted {
		c.count--
	}
}

// unshareLocked takes h's items out of Options.LiveItems (when they are there).
func (c *Conn) unshareLocked(h *rollout) {
	if h.live != nil {
		c.opts.LiveItems.remove(h.live)
		h.live = nil
	}
}

// shareLocked puts h's items in Options.LiveItems from now on when they belong there: an
// append-shape rollout of a store:true Response, stored only when it ends.
func (c *Conn) shareLocked(h *rollout, stored bool) {
	if h.live == nil && stored && c.opts.LiveItems != nil && !h.final {
		h.live = &liveHolder{owner: c.opts.Owner}
	}
}

// modelBudget is Options.Budget as a rollout and its backend see it (sampler.Config.Budget):
// what a step holds (its output as it accrues, an upstream's event being read) is counted there
// while the step runs. Nil when there is none (not a nil *Budget in a non-nil interface).
func (c *Conn) modelBudget() sampler.Budget {
	if c.opts.Budget == nil {
		return nil
	}
	return stepBudget{c.opts.Budget}
}

// stepBudget is a Budget as a sampling step reserves in it: what does not fit first has
// suspended live rollouts parked to make room (Budget.TryReserveFor, without a key's share),
// as a create or append does, so that a step admitted under pressure is not failed for the
// charges of idle suspended goroutines; then the step fails (sampler.MemoryError). It is
// called on the rollout's goroutine, which holds no connection's lock.
type stepBudget struct{ b *Budget }

// TryReserve implements sampler.Budget.
func (s stepBudget) TryReserve(n int64) bool { return s.b.TryReserveFor("", 0, n) }

// Grow implements sampler.Budget.
func (s stepBudget) Grow(n int64) { s.b.Grow(n) }

// Release implements sampler.Budget.
func (s stepBudget) Release(n int64) { s.b.Release(n) }
