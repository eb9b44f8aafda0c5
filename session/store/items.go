package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/tetherd/tether/protocol"
)

// ItemFinder is an optional interface of a Store: FindItems returns copies of the input or
// output items with these ids from owner's stored responses (item_references' targets), keyed
// by id; an id no stored response of owner holds is absent. ids may repeat. When several of
// owner's responses hold an id, the item is the most recently used one's (its input's copy
// before its output's): copies can differ, since a client may give its input items ids of its
// own. Memory and Redis keep an item index, so a call costs O(len(ids)), not O(stored
// responses); Guarded passes it on.
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
// with each wanted id. It backs a connection's item_reference lookups.
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
		if it, ok := firstItem(id, best.r.Input, best.r.Response.Output); ok {
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

// itemIDs returns the distinct ids of r's input and output items, in order: what Redis
// indexes (the response hash's items field).
func itemIDs(r *Response) []string {
	ids := []string{}
	seen := make(map[string]struct{}, len(r.Input)+len(r.Response.Output))
	for _, items := range [2][]protocol.Item{r.Input, r.Response.Output} {
		for i := range items {
			id := items[i].ID
			if _, dup := seen[id]; dup || id == "" {
				continue
			}
			seen[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	return ids
}

// itemPrefix is the key prefix of owner's item index sets.
func (s *Redis) itemPrefix(owner string) string {
	return s.o.Prefix + "i:" + url.QueryEscape(owner) + ":"
}

// findBatch bounds the ids of one findScript call.
const findBatch = 256

// FindItems implements ItemFinder with the item index (see the key layout of Redis): one
// script per 256 distinct ids reads each id's index set and the input and output of each
// response found, without changing recency, so it costs O(len(ids) + the items of the
// responses found + the other holders of an id), whatever Redis holds. When several of owner's
// responses hold an id, the item comes from the most recently used of them (input before
// output), as for Memory.
//
// Responses that an older build of Tether stored have no index entries. Until the store is
// known to be wholly indexed (the itemidx key), an id that the index misses makes FindItems
// walk the store's responses once (ZSCAN of the lru set, not the keyspace) to index those
// that are not, then ask the index again: after an upgrade the first miss pays one walk, and
// later ones none. While an older build still runs against the store (a rolling upgrade), its
// activity keeps the index marked incomplete, so every miss walks, as every lookup did before.
func (s *Redis) FindItems(ctx context.Context, ids []string, owner string) (map[string]protocol.Item, error) {
	want := make([]string, 0, len(ids))
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			want = append(want, id)
		}
	}
	found := make(map[string]protocol.Item, len(want))
	complete, err := s.findIndexed(ctx, want, owner, found)
	if err != nil || complete || len(found) == len(want) {
		return found, err
	}
	if err := s.reindex(ctx); err != nil {
		return found, err
	}
	missing := want[:0]
	for _, id := range want {
		if _, ok := found[id]; !ok {
			missing = append(missing, id)
		}
	}
	_, err = s.findIndexed(ctx, missing, owner, found)
	return found, err
}

// findIndexed adds the items of ids (distinct) that owner's index finds to found; it reports
// whether the index is complete (no stored response lacks its entries).
func (s *Redis) findIndexed(ctx context.Context, ids []string, owner string, found map[string]protocol.Item) (bool, error) {
	complete := true
	for len(ids) > 0 {
		batch := ids[:min(len(ids), findBatch)]
		ids = ids[len(batch):]
		args := s.args(s.itemPrefix(owner))
		for _, id := range batch {
			args = append(args, id)
		}
		v, err := findScript.Run(ctx, s.c, s.common, args...).Slice()
		if err != nil {
			return false, wrap("find_item", err)
		}
		if len(v) < 1+len(batch) || (len(v)-1-len(batch))%3 != 0 {
			return false, fmt.Errorf("store: redis find_item: answer of %d values for %d ids", len(v), len(batch))
		}
		if c, _ := v[0].(int64); c != 1 {
			complete = false
		}
		type held struct{ input, output []protocol.Item }
		responses := make(map[string]*held)
		for i := 1 + len(batch); i+2 < len(v); i += 3 {
			k, _ := v[i].(string)
			h := &held{}
			if err := errors.Join(decode(v[i+1], &h.input), decode(v[i+2], &h.output)); err != nil {
				return false, err
			}
			responses[k] = h
		}
		for i, id := range batch {
			k, _ := v[1+i].(string)
			h := responses[k]
			if h == nil {
				continue
			}
			if it, ok := firstItem(id, h.input, h.output); ok {
				found[id] = it
			}
		}
	}
	return complete, nil
}

// firstItem returns the first item with id of lists, in order.
func firstItem(id string, lists ...[]protocol.Item) (protocol.Item, bool) {
	for _, items := range lists {
		for i := range items {
			if items[i].ID == id {
				return items[i], true
			}
		}
	}
	return protocol.Item{}, false
}

// reindexBatch is how many response keys one reindexScript call indexes.
const reindexBatch = 128

// reindex walks every stored response (the lru set) and writes the item index entries of
// those that lack them; when no older build stamped meanwhile it marks the index complete.
func (s *Redis) reindex(ctx context.Context) error {
	gen, err := reindexGenScript.Run(ctx, s.c, s.common, s.args()...).Text()
	if err != nil {
		return wrap("find_item", err)
	}
	var cursor uint64
	for {
		kv, next, err := s.c.ZScan(ctx, s.common[0], cursor, "", reindexBatch).Result()
		if err != nil {
			return wrap("find_item", err)
		}
		args := s.args()
		for i := 0; i < len(kv); i += 2 { // member, score
			args = append(args, kv[i])
		}
		if len(args) > 2 {
			if err := reindexScript.Run(ctx, s.c, s.common, args...).Err(); err != nil {
				return wrap("find_item", err)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if err := reindexMarkScript.Run(ctx, s.c, s.common, s.args(gen)...).Err(); err != nil {
		return wrap("find_item", err)
	}
	return nil
}
