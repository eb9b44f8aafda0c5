package compat

import (
	"github.com/tetherd/tether/protocol"
)

// segmentItem looks id up in the items of the connection's cached segments (an
// item_reference is resolved there before the owner's stored items).
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
