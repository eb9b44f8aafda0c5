package compat

import (
	"fmt"
	"net/http"

	"github.com/tetherd/tether/protocol"
)

// ItemFinder is an optional interface of a Store: FindItem returns a copy of the stored input or
// output item with this id from a response of owner, or false (unknown, deleted, or another
// owner's).
type ItemFinder interface {
	FindItem(id, owner string) (protocol.Item, bool)
}

// resolveRefs returns input with every item_reference replaced by the item it names: first
// one of the connection's cached segments, then the caller's stored items (owner-checked). An
// id found nowhere is invalid_item_reference (400, param "input[i]"). input is returned as is
// when it holds no reference.
func (r *registry) resolveRefs(input []protocol.Item) ([]protocol.Item, *protocol.Error) {
	var out []protocol.Item
	for i := range input {
		if input[i].Type != protocol.ItemReference {
			continue
		}
		if out == nil {
			out = append([]protocol.Item(nil), input...)
		}
		it, ok := r.findItem(input[i].ID)
		if !ok {
			return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidItemReference, fmt.Sprintf("input[%d]", i),
				"Item with id '%s' not found.", input[i].ID)
		}
		out[i] = it
	}
	if out == nil {
		return input, nil
	}
	return out, nil
}

// findItem looks id up in the connection's segments, then in the Store.
func (r *registry) findItem(id string) (protocol.Item, bool) {
	if id == "" {
		return protocol.Item{}, false
	}
	r.mu.Lock()
	for _, seg := range r.segs.byID {
		for j := range seg.chain {
			if seg.chain[j].ID == id {
				it := seg.chain[j]
				r.mu.Unlock()
				return it, true
			}
		}
	}
	r.mu.Unlock()
	if f, ok := r.store.(ItemFinder); ok {
		return f.FindItem(id, r.owner)
	}
	return protocol.Item{}, false
}

// FindStoredItem returns the item id of owner's stored responses when s implements ItemFinder
// (session.Options.FindItem for the append shape).
func FindStoredItem(s Store, id, owner string) (protocol.Item, bool) {
	if f, ok := s.(ItemFinder); ok {
		return f.FindItem(id, owner)
	}
	return protocol.Item{}, false
}
