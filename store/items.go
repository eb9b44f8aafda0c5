package store

import (
	"context"

	"github.com/tetherd/tether/protocol"
)

// ItemFinder is an optional interface of a Store: FindItem returns a copy of the input or output
// item with this id from a stored response of owner (an item_reference's target), or
// ErrNotFound. Memory and Guarded implement it; Redis does not (its references resolve only
// against the connection's own responses).
type ItemFinder interface {
	FindItem(ctx context.Context, id, owner string) (protocol.Item, error)
}

// FindItem asks s for the item id of owner when s implements ItemFinder; otherwise, and for a
// nil s, it returns ErrNotFound.
func FindItem(ctx context.Context, s Store, id, owner string) (protocol.Item, error) {
	if f, ok := s.(ItemFinder); ok {
		return f.FindItem(ctx, id, owner)
	}
	return protocol.Item{}, ErrNotFound
}

// FindItem implements ItemFinder by scanning owner's responses (their input and output items),
// O(stored items), without changing their recency.
func (s *Memory) FindItem(_ context.Context, id, owner string) (protocol.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for el := s.lru.Front(); el != nil; el = el.Next() {
		r := el.Value.(*memEntry).r
		if r.Owner != owner {
			continue
		}
		for _, items := range [][]protocol.Item{r.Input, r.Response.Output} {
			for i := range items {
				if items[i].ID == id {
					return items[i], nil
				}
			}
		}
	}
	return protocol.Item{}, ErrNotFound
}

// FindItem implements ItemFinder under the guard's timeout.
func (g *Guarded) FindItem(ctx context.Context, id, owner string) (protocol.Item, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	it, err := FindItem(ctx, g.s, id, owner)
	return it, g.check("find_item", id, err)
}
