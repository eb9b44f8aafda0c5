package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// ResolveItemRefs replaces every item_reference of input by the item it names: local's (the
// connection's own items, looked up first), else owner's stored items in st (FindStoredItem).
// input is returned as is when it holds no reference. Both shapes use it.
func ResolveItemRefs(ctx context.Context, input []protocol.Item, local func(id string) (protocol.Item, bool),
	st store.Store, owner string) ([]protocol.Item, error) {
	var out []protocol.Item
	for i := range input {
		if input[i].Type != protocol.ItemReference {
			continue
		}
		if out == nil {
			out = append([]protocol.Item(nil), input...)
		}
		it, ok := local(input[i].ID)
		if !ok {
			var err error
			if it, err = FindStoredItem(ctx, st, input[i].ID, owner, i); err != nil {
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

// FindStoredItem returns the stored item id of owner for the item_reference input[i]:
// invalid_item_reference when st is nil or does not hold it, store_unavailable when st fails.
func FindStoredItem(ctx context.Context, st store.Store, id, owner string, i int) (protocol.Item, error) {
	if st != nil {
		it, err := store.FindItem(ctx, st, id, owner)
		switch {
		case err == nil:
			return it, nil
		case !errors.Is(err, store.ErrNotFound):
			return protocol.Item{}, StoreUnavailable()
		}
	}
	return protocol.Item{}, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidItemReference, fmt.Sprintf("input[%d]", i),
		"Item with id '%s' not found.", id)
}
