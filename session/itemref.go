package session

import (
	"fmt"
	"net/http"

	"github.com/tetherd/tether/protocol"
)

// ResolveRefs returns input with every item_reference replaced by the item it names: an item
// of one of the connection's rollouts, else Options.FindItem (the caller's stored items). An id
// found nowhere is invalid_item_reference (400, param "input[i]"). input is returned as is
// when it holds no reference.
func (c *Conn) ResolveRefs(input []protocol.Item) ([]protocol.Item, *protocol.Error) {
	var out []protocol.Item
	for i := range input {
		if input[i].Type != protocol.ItemReference {
			continue
		}
		if out == nil {
			out = append([]protocol.Item(nil), input...)
		}
		it, ok := c.findItem(input[i].ID)
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

func (c *Conn) findItem(id string) (protocol.Item, bool) {
	c.mu.Lock()
	for _, h := range c.reg {
		for j := range h.items {
			if h.items[j].ID == id {
				it := h.items[j]
				c.mu.Unlock()
				return it, true
			}
		}
	}
	c.mu.Unlock()
	if c.opts.FindItem != nil {
		return c.opts.FindItem(id)
	}
	return protocol.Item{}, false
}
