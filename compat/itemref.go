package compat

import (
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// resolveRefs returns input with every item_reference replaced by the item it names: first
// one of the connection's cached segments, then the caller's stored items (owner-checked,
// session.FindStoredItem). An id found nowhere is invalid_item_reference (400, param
// "input[i]"). input is returned as is when it holds no reference.
func (r *registry) resolveRefs(input []protocol.Item) ([]protocol.Item, *protocol.Error) {
	var out []protocol.Item
	for i := range input {
		if input[i].Type != protocol.ItemReference {
			continue
		}
		if out == nil {
			out = append([]protocol.Item(nil), input...)
		}
		it, ok := r.segmentItem(input[i].ID)
		if !ok {
			var err *protocol.Error
			if it, err = session.FindStoredItem(r.conn.Context(), r.store, input[i].ID, r.owner, i); err != nil {
				return nil, err
			}
		}
		out[i] = it
	}
	if out == nil {
		return input, nil
	}
	return out, nil
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
