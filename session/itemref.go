package session

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// ResolveItemRefs replaces every item_reference of input by the item it names: held's (the
// connection's own items and the server's live ones, Conn.Items, looked up first; nil for
// none), else owner's stored items in st (store.FindItems). Each source is asked once for all
// the references, however many there are. input is returned as is when it holds no
// reference, else a copy. The first reference neither holds is invalid_item_reference (param
// input[i]), whose message says which items cannot be found from here; a failing store is
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
			return nil, itemNotFound(i, out[i].ID)
		}
		out[i] = it
	}
	return out, nil
}

// itemNotFound is the invalid_item_reference error (400, param input[i]) of a reference to
// id that nothing the request can see holds. Its message names the items that are out of
// reach by design: a store:false response's stay on its connection, and a live append-shape
// rollout's are stored only when it ends, so another instance sharing the store finds them
// only then.
func itemNotFound(i int, id string) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidItemReference, fmt.Sprintf("input[%d]", i),
		"Item with id '%s' not found. Items of store:false responses are found only on their own connection, and items of an append-shape rollout that runs on another server instance only once it has ended.", id)
}
