package compat

import (
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// resolveRefs returns input with every item_reference replaced by the item it names: first
// one of the connection's cached segments, then the caller's stored items (owner-checked,
// session.FindStoredItem). An id found nowhere is invalid_item_reference (400, param
// "input[i]"). input is returned as is when it holds no reference.
func (r *registry) resolveRefs(input []protocol.Item) ([]protocol.Item, error) {
	return session.ResolveItemRefs(r.conn.Context(), input, r.segmentItem, r.store, r.owner)
}

// segmentItem looks id up in the items of the connection's cached segments.
func (r *registry) segmentItem(id string) (protocol.Item, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, seg := range r.segs.byID {
		for j := range seg.chain {
			if seg.chain[j].ID == id {
				return seg.chain[j], true
			}
		}
	}
	return protocol.Item{}, false
}
