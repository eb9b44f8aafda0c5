package store

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/tetherd/tether/protocol"
)

// ItemFinder is an optional interface of a Store: FindItems returns copies of the input or
// output items with these ids from owner's stored responses (item_references' targets), keyed
// by id; an id no stored response of owner holds is absent. ids may repeat. It walks the
// stored responses once for all ids, so a request's references cost one walk, not one each.
// Memory, Redis and Guarded implement it.
type ItemFinder interface {
	FindItems(ctx context.Context, ids []string, owner string) (map[string]protocol.Item, error)
}

// FindItems asks s for the items ids of owner when s implements ItemFinder; otherwise, and for
// a nil s, it finds none.
func FindItems(ctx context.Context, s Store, ids []string, owner string) (map[string]protocol.Item, error) {
	if f, ok := s.(ItemFinder); ok && len(ids) > 0 {
		return f.FindItems(ctx, ids, owner)
	}
	return map[string]protocol.Item{}, nil
}

// FindItem is FindItems for one id: ErrNotFound when owner's stored responses do not hold it.
func FindItem(ctx context.Context, s Store, id, owner string) (protocol.Item, error) {
	found, err := FindItems(ctx, s, []string{id}, owner)
	if err != nil {
		return protocol.Item{}, err
	}
	it, ok := found[id]
	if !ok {
		return protocol.Item{}, ErrNotFound
	}
	return it, nil
}

// ItemSearch collects the items of a set of wanted ids in one walk over any number of item
// lists: Take each list in turn until it reports none missing; Found holds the first item seen
// with each wanted id. It backs every item_reference lookup (the stores' and a connection's).
type ItemSearch struct {
	want map[string]struct{}
	// Found maps each wanted id seen so far to its item.
	Found map[string]protocol.Item
}

// NewItemSearch returns a search for ids (which may repeat).
func NewItemSearch(ids []string) *ItemSearch {
	s := &ItemSearch{want: make(map[string]struct{}, len(ids)), Found: make(map[string]protocol.Item)}
	for _, id := range ids {
		s.want[id] = struct{}{}
	}
	return s
}

// Take records the wanted items of items; it reports whether some wanted ids are still missing.
func (s *ItemSearch) Take(items []protocol.Item) bool {
	for i := range items {
		id := items[i].ID
		if _, ok := s.want[id]; ok {
			if _, seen := s.Found[id]; !seen {
				s.Found[id] = items[i]
			}
		}
	}
	return len(s.Found) < len(s.want)
}

// itemKey names an item of an owner's stored responses in Memory's item index.
type itemKey struct{ owner, id string }

// holders are the entries whose input or output holds an item id: first, and more when
// several do (a chain's later input repeating an item, or a client's own ids reused).
type holders struct {
	first *memEntry
	more  map[*memEntry]struct{}
}

// indexLocked adds e's input and output item ids to the item index.
func (s *Memory) indexLocked(e *memEntry) {
	for _, items := range [2][]protocol.Item{e.r.Input, e.r.Response.Output} {
		for i := range items {
			if items[i].ID == "" {
				continue
			}
			k := itemKey{e.r.Owner, items[i].ID}
			h, ok := s.items[k]
			switch {
			case !ok:
				s.items[k] = holders{first: e}
			case h.first == e:
			default:
				if h.more == nil {
					h.more = make(map[*memEntry]struct{})
					s.items[k] = h
				}
				h.more[e] = struct{}{}
			}
		}
	}
}

// unindexLocked removes e from the item index.
func (s *Memory) unindexLocked(e *memEntry) {
	for _, items := range [2][]protocol.Item{e.r.Input, e.r.Response.Output} {
		for i := range items {
			k := itemKey{e.r.Owner, items[i].ID}
			h, ok := s.items[k]
			switch {
			case !ok:
			case h.first != e:
				delete(h.more, e)
			case len(h.more) == 0:
				delete(s.items, k)
			default:
				for m := range h.more {
					h.first = m
					delete(h.more, m)
					break
				}
				if len(h.more) == 0 {
					h.more = nil
				}
				s.items[k] = h
			}
		}
	}
}

// item returns the first item with id of e's input, else of its output.
func (e *memEntry) item(id string) (protocol.Item, bool) {
	for _, items := range [2][]protocol.Item{e.r.Input, e.r.Response.Output} {
		for i := range items {
			if items[i].ID == id {
				return items[i], true
			}
		}
	}
	return protocol.Item{}, false
}

// FindItems implements ItemFinder with the store's item index (item id → the entries that
// hold it, kept by Put, eviction and Delete), without changing recency. When several of
// owner's responses hold an id, the item comes from the most recently used of them (its input
// before its output): the copies can differ, as a client may give its input items ids of its
// own. It costs O(len(ids) + the items of the responses found + the other holders of an id),
// whatever the store holds.
func (s *Memory) FindItems(_ context.Context, ids []string, owner string) (map[string]protocol.Item, error) {
	found := make(map[string]protocol.Item, len(ids))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, ok := found[id]; ok {
			continue
		}
		h, ok := s.items[itemKey{owner, id}]
		if !ok {
			continue
		}
		best := h.first
		for e := range h.more {
			if e.used > best.used {
				best = e
			}
		}
		if it, ok := best.item(id); ok {
			found[id] = it
		}
	}
	return found, nil
}

// FindItems implements ItemFinder under the guard's timeout.
func (g *Guarded) FindItems(ctx context.Context, ids []string, owner string) (map[string]protocol.Item, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	found, err := FindItems(ctx, g.s, ids, owner)
	first := ""
	if len(ids) > 0 {
		first = ids[0]
	}
	return found, g.check("find_item", first, err)
}

// FindItems implements ItemFinder: it walks owner's response keys (SCAN) once and reads their
// input and output fields in pipelined batches, O(stored responses of owner), stopping when
// every id is found; no recency changes.
func (s *Redis) FindItems(ctx context.Context, ids []string, owner string) (map[string]protocol.Item, error) {
	search := NewItemSearch(ids)
	iter := s.c.Scan(ctx, 0, s.ownerPrefix(owner)+"*", 256).Iterator()
	var batch []string
	// flush reads batch's items into search; false when every id is found.
	flush := func() (bool, error) {
		defer func() { batch = batch[:0] }()
		pipe := s.c.Pipeline()
		cmds := make([]*redis.SliceCmd, len(batch))
		for i, k := range batch {
			cmds[i] = pipe.HMGet(ctx, k, "input", "output")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return false, wrap("find_item", err)
		}
		for _, c := range cmds {
			for _, v := range c.Val() {
				if v == nil {
					continue // expired meanwhile
				}
				var items []protocol.Item
				if err := decode(v, &items); err != nil {
					return false, err
				}
				if !search.Take(items) {
					return false, nil
				}
			}
		}
		return true, nil
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 256 {
			if more, err := flush(); !more || err != nil {
				return search.Found, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return search.Found, wrap("find_item", err)
	}
	if len(batch) > 0 {
		if _, err := flush(); err != nil {
			return search.Found, err
		}
	}
	return search.Found, nil
}
