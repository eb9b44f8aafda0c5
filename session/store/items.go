package store

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/protocol"
)

// ItemFinder is an optional interface of a Store: FindItem returns a copy of the input or output
// item with this id from a stored response of owner (an item_reference's target), or
// ErrNotFound. Memory, Redis and Guarded implement it.
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

// FindItem implements ItemFinder: it walks owner's response keys (SCAN) and reads their input
// and output fields in pipelined batches, O(stored responses of owner); no recency changes.
func (s *Redis) FindItem(ctx context.Context, id, owner string) (protocol.Item, error) {
	iter := s.c.Scan(ctx, 0, s.ownerPrefix(owner)+"*", 256).Iterator()
	var batch []string
	flush := func() (protocol.Item, bool, error) {
		defer func() { batch = batch[:0] }()
		pipe := s.c.Pipeline()
		cmds := make([]*redis.SliceCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.HMGet(ctx, k, "input", "output")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return protocol.Item{}, false, wrap("find_item", err)
		}
		for _, c := range cmds {
			for _, v := range c.Val() {
				if v == nil {
					continue // expired meanwhile
				}
				var items []protocol.Item
				if err := decode(v, &items); err != nil {
					return protocol.Item{}, false, err
				}
				for i := range items {
					if items[i].ID == id {
						return items[i], true, nil
					}
				}
			}
		}
		return protocol.Item{}, false, nil
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 256 {
			if it, ok, err := flush(); ok || err != nil {
				return it, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return protocol.Item{}, wrap("find_item", err)
	}
	if len(batch) > 0 {
		if it, ok, err := flush(); ok || err != nil {
			return it, err
		}
	}
	return protocol.Item{}, ErrNotFound
}
