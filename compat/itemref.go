package compat

import (
	"github.com/tetherd/tether/protocol"
)

// segmentItem looks id up in the items of the connection's cached segments (an
// item_reference is resolved there before the owner's stored items).
func (r *registry) segmentItem(id string) (protocol.Item, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var it protocol.Item
	found := false
	r.segs.ended.Each(func(seg *segment) bool {
		for j := range seg.chain {
			if seg.chain[j].ID == id {
				it, found = seg.chain[j], true
				return false
			}
		}
		return true
	})
	return it, found
}
