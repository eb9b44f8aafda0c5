package session

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// ResolveItemRefs replaces every item_reference of input by the item it names: held's (the
// connection's own items, looked up first; nil for none), else owner's stored items in st
// (store.FindItems). Each source is asked once for all the references, however many there
// are. input is returned as is when it holds no reference, else a copy. The first reference
// neither holds is invalid_item_reference (param input[i]); a failing store is
// store_unavailable. Both shapes and compaction use it.
func ResolveItemRefs(ctx context.Context, input []protocol.Item, held func(ids []string) map[string]protocol.Item,
	st store.Store, owner string) ([]protocol.Item, error) {
	var ids []string
	for i := range input {
		if input[i].Type == protocol.ItemReference {
			ids = append(ids, input[i].ID)
		}
	}
	if ids == nil {
		return input, nil
	}
	found := map[string]protocol.Item{}
	if held != nil {
		found = held(ids)
	}
	var missing []string
	for _, id := range ids {
		if _, ok := found[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		stored, err := store.FindItems(ctx, st, missing, owner)
		if err != nil {
			return nil, StoreUnavailable()
		}
		for id, it := range stored {
			found[id] = it
		}
	}
	out := protocol.AppendItems(nil, input) // input is the request's: resolved into a copy
	for i := range out {
		if out[i].Type != protocol.ItemReference {
			continue
		}
		it, ok := found[out[i].ID]
		if !ok {
			return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidItemReference, fmt.Sprintf("input[%d]", i),
				"Item with id '%s' not found.", out[i].ID)
		}
		out[i] = it
	}
	return out, nil
}
