package session

import (
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// The registry is keyed by response id. It holds the connection's rollouts under their keys
// (Conn.reg: live, parked, and ended append-shape rollouts) and the ended Responses that a
// shape answering several Responses per rollout keeps under their own ids (the public shape's
// segments: aliases of the rollout they ran on, with the chain through them and the shape's
// data for them). Every ended entry of both kinds is in one least recently used list
// (Conn.ended) and leaves it through one eviction loop (evictLocked), under one set of bounds:
//
//   - Limits.CacheResponses counts the Responses the connection keeps: each append-shape
//     rollout, live or ended, and each kept Response. A rollout of a shape that keeps its
//     Responses (Config.SuspendOnAnswer) is reached through them and is not counted itself.
//   - Limits.CacheBytes bounds the bytes of every entry: the items and settings of each
//     rollout, the estimate the shape gives for each kept Response. They are held in
//     Options.Budget while the entry exists and released exactly once when it leaves.
//   - Only ended entries are evicted, least recently used first, and never the connection's
//     newest one (the Response just answered); a Response that was the latest of its suspended
//     rollout ends that rollout when it goes (nothing can reach it any more; orphan.go).

// keptResponse is a Response a shape keeps in the registry after it ended (KeepResponse).
// Immutable once kept.
type keptResponse struct {
	id, rollout string          // its id, and the key of the rollout it ran on
	chain       []protocol.Item // every item of its chain through it, read-only
	bytes       int64
	value       any // the shape's
}

// endedEntry is a value of the registry's least recently used list: an ended rollout (h) or a
// kept Response (k).
type endedEntry struct {
	h *rollout
	k *keptResponse
}

// bytes is what the entry holds.
func (e endedEntry) bytes() int64 {
	if e.k != nil {
		return e.k.bytes
	}
	return e.h.bytes
}

// KeepResponse records the ended Response id, which ran on the rollout key, in the
// connection's registry for previous_response_id: chain is every item of its chain through it
// (read-only from now on), bytes the estimate of what it holds (counted toward
// Limits.CacheBytes and held in Options.Budget while it is kept), value the shape's data for
// it (Response returns it). It is the connection's newest entry; least recently used ended
// entries of both shapes are then evicted while the registry is over a bound (see the rules
// above). Call it with no lock held that a rollout's sink takes: an evicted Response that was
// the latest of its suspended rollout cancels that rollout. A Response already kept under id
// is replaced.
func (c *Conn) KeepResponse(id, key string, chain []protocol.Item, bytes int64, value any) {
	c.mu.Lock()
	if c.reg == nil { // closed
		c.mu.Unlock()
		return
	}
	if e, ok := c.ended.Peek(id); ok {
		c.dropEndedLocked(id, e)
	}
	k := &keptResponse{id: id, rollout: key, chain: chain[:len(chain):len(chain)], bytes: bytes, value: value}
	c.opts.Budget.Grow(bytes)
	c.held += bytes
	c.count++
	c.ended.Put(id, endedEntry{k: k}, bytes)
	c.newest = id
	c.evictLocked()
	c.mu.Unlock()
	c.cancelOrphans()
}

// Response returns the shape's value of the kept Response id (KeepResponse) and makes it the
// most recently used entry; ok is false when it is not kept (never, or evicted).
func (c *Conn) Response(id string) (value any, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keptLocked(id, true)
}

// PeekResponse is Response without the use.
func (c *Conn) PeekResponse(id string) (value any, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keptLocked(id, false)
}

func (c *Conn) keptLocked(id string, use bool) (any, bool) {
	if c.reg == nil {
		return nil, false
	}
	e, ok := c.ended.Peek(id)
	if !ok || e.k == nil {
		return nil, false
	}
	if use {
		c.ended.Get(id)
	}
	return e.k.value, true
}

// ForgetResponse removes the kept Response id (a failed continuation drops its parent); it is
// not counted as an eviction. When id was the latest Response of its suspended rollout
// nothing can reach that rollout any more: it is cancelled (reason cancelled, answered as its
// sink answers a cancel) and ForgetResponse reports true. Call it without holding a lock that
// the rollout's sink takes: Cancel may wait for a rollout that is parking.
func (c *Conn) ForgetResponse(id string) (orphaned bool) {
	c.mu.Lock()
	if e, ok := c.ended.Peek(id); ok && e.k != nil && c.reg != nil {
		orphaned = c.dropEndedLocked(id, e)
	}
	c.mu.Unlock()
	c.cancelOrphans()
	return orphaned
}

// Items returns the items with these ids that the connection can see, keyed by id, for
// item_references: those its registry holds (ended rollouts' chains, kept Responses', and a
// live rollout's context as of its latest suspension), then, for the ids still missing, those
// of the server's live append-shape rollouts of store:true Responses of the same owner
// (Options.LiveItems). An id none holds is absent. One walk of the registry answers every id
// (a walk per id would cost a create of many references the registry's size for each).
func (c *Conn) Items(ids []string) map[string]protocol.Item {
	found := c.registryItems(ids)
	var missing []string
	for _, id := range ids {
		if _, ok := found[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 || c.opts.LiveItems == nil {
		return found
	}
	for id, it := range c.opts.LiveItems.Find(c.opts.Owner, missing) {
		found[id] = it
	}
	return found
}

// registryItems is the registry's part of Items.
func (c *Conn) registryItems(ids []string) map[string]protocol.Item {
	search := store.NewItemSearch(ids)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.reg {
		items := h.items
		if !h.final {
			items = h.seen
		}
		if !search.Take(items) {
			return search.Found
		}
	}
	if c.ended != nil {
		c.ended.Each(func(e endedEntry) bool {
			return e.k == nil || search.Take(e.k.chain)
		})
	}
	return search.Found
}

// evictLocked drops the least recently used ended entries while the registry is over
// Limits.CacheResponses or Limits.CacheBytes, at O(1) each, counting each in
// Metrics.Evictions. Live rollouts are never evicted, nor the newest entry.
func (c *Conn) evictLocked() {
	for c.count > c.opts.CacheResponses || c.held > c.opts.CacheBytes {
		key, e, ok := c.ended.Oldest()
		if !ok || key == c.newest {
			return
		}
		c.dropEndedLocked(key, e)
		if m := c.opts.Metrics; m != nil {
			m.Evictions.Add(1)
		}
	}
}

// dropEndedLocked removes the ended entry e under key from the registry, returning its bytes
// to the Budget. A kept Response that was the latest of its live rollout orphans that rollout:
// it is queued for cancelOrphans, and dropEndedLocked reports true.
func (c *Conn) dropEndedLocked(key string, e endedEntry) (orphaned bool) {
	if e.h != nil {
		c.dropLocked(e.h)
		return false
	}
	k := e.k
	c.ended.Remove(key)
	c.opts.Budget.Release(k.bytes)
	c.held -= k.bytes
	c.count--
	if h, ok := c.reg[k.rollout]; ok && !h.final && h.latest == k.id {
		h.latest = ""
		c.orphans = append(c.orphans, orphan{key: k.rollout, id: k.id})
		return true
	}
	return false
}
