package session

import (
	"sync"

	"github.com/tetherd/tether/protocol"
)

// LiveItems indexes, for a whole server, the items of the append-shape rollouts of store:true
// Responses that have not ended: item id → the rollouts holding it, per owner. An
// append-shape rollout is written to the store only when it ends, so without this index an
// item_reference to a function_call it suspended at (or to an item a client sent it with an
// id of its own) would be found by no other connection and by no POST /v1/responses of the
// same API key while the rollout lives; the public shape stores each of its Responses as it
// ends, so its items are found in the store.
//
// A rollout's items are indexed as of its latest suspension (the items the client has seen in
// response.done: history, inputs and outputs; items without an id are not), at the cost of
// its new items only, and leave the index once it has ended and was stored (or has left the
// server: parked to the shared store and let go). A lookup costs O(ids), whatever the server
// holds. It is in this process only: another instance sharing the store finds the items once
// the rollout has ended and was stored.
//
// Options.LiveItems shares one LiveItems between a server's connections; a nil *LiveItems
// indexes nothing and finds nothing. Safe for concurrent use. The items themselves are the
// rollouts' (counted in Options.Budget as theirs); the index's own entries, LiveItemBytes
// each, are counted in the Budget given to NewLiveItems from when they are indexed until they
// leave the index.
type LiveItems struct {
	budget *Budget // nil: the entries count nowhere

	mu  sync.Mutex // guards ids
	ids map[liveKey][]liveRef
}

// LiveItemBytes is what one entry of the index (one item id of one rollout) holds, in bytes,
// as the Budget counts it: its map key (the owner's and the item id's string headers, the
// strings being the items'), its slice of holders and the map's slot overhead, rounded up.
const LiveItemBytes = 100

// liveKey names an item id of an owner.
type liveKey struct{ owner, id string }

// liveRef is one holder of an item: the rollout's indexed items and the item's position.
type liveRef struct {
	h   *liveHolder
	pos int
}

// liveHolder is the index's part of one rollout (rollout.live): the items indexed so far,
// read-only (a prefix of the rollout's append-only context).
type liveHolder struct {
	owner   string
	items   []protocol.Item // guarded by LiveItems.mu
	entries int64           // guarded by LiveItems.mu: the index entries of items (the ones with an id)
}

// NewLiveItems returns an empty index whose entries count in b (LiveItemBytes each; nil: in
// no budget). An entry is counted whether it fits or not: the item it indexes was admitted
// already, with its rollout.
func NewLiveItems(b *Budget) *LiveItems {
	return &LiveItems{budget: b, ids: make(map[liveKey][]liveRef)}
}

// add indexes the items of ctx (the rollout's whole context, read-only) that h has not
// indexed yet.
func (l *LiveItems) add(h *liveHolder, ctx []protocol.Item) {
	if l == nil || len(ctx) <= len(h.items) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	added := int64(0)
	for i := len(h.items); i < len(ctx); i++ {
		if id := ctx[i].ID; id != "" {
			k := liveKey{h.owner, id}
			l.ids[k] = append(l.ids[k], liveRef{h: h, pos: i})
			added++
		}
	}
	h.items = ctx[:len(ctx):len(ctx)]
	h.entries += added
	l.budget.Grow(added * LiveItemBytes)
}

// remove takes every item of h out of the index.
func (l *LiveItems) remove(h *liveHolder) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range h.items {
		id := h.items[i].ID
		if id == "" {
			continue
		}
		k := liveKey{h.owner, id}
		refs := l.ids[k]
		for j := 0; j < len(refs); j++ {
			if refs[j].h == h {
				refs[j] = refs[len(refs)-1]
				refs[len(refs)-1] = liveRef{}
				refs = refs[:len(refs)-1]
				j--
			}
		}
		if len(refs) == 0 {
			delete(l.ids, k)
		} else {
			l.ids[k] = refs
		}
	}
	h.items = nil
	l.budget.Release(h.entries * LiveItemBytes)
	h.entries = 0
}

// Find returns the items with these ids (which may repeat) that live rollouts of owner hold,
// keyed by id; an id none holds is absent. When several hold an id, any one's copy is given.
func (l *LiveItems) Find(owner string, ids []string) map[string]protocol.Item {
	found := make(map[string]protocol.Item)
	if l == nil {
		return found
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if _, ok := found[id]; ok {
			continue
		}
		if refs := l.ids[liveKey{owner, id}]; len(refs) > 0 {
			found[id] = refs[0].h.items[refs[0].pos]
		}
	}
	return found
}

// Len returns how many item ids the index holds (for tests and metrics).
func (l *LiveItems) Len() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ids)
}
