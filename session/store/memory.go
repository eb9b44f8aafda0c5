package store

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"

	"github.com/tetherd/tether/protocol"
)

// Defaults of the byte and count bounds (-store-responses, -store-bytes).
const (
	DefaultResponses = 10000
	DefaultBytes     = 256 << 20
)

// Memory is the default Store: in this process, bounded by a count and by Size, evicting the
// least recently used response first. With per-key quotas (SetKeyQuota), a Put over its
// quota key's share evicts that key's own least recently used responses, so that one key
// cannot evict another's. Its calls never fail with anything but ErrNotFound and
// ErrCursorNotFound.
type Memory struct {
	maxCount int
	maxBytes int64
	keyCount int   // per Response.Quota; 0: none
	keyBytes int64 // per Response.Quota; 0: none

	mu    sync.Mutex // guards the fields below
	byID  map[string]*list.Element
	lru   *list.List // of *memEntry, most recent at the front
	bytes int64
	keys  map[string]*keyUsage // by Response.Quota; deleted when its key holds nothing
	items map[itemKey]holders  // the item index: the entries whose input or output hold an id
	clock uint64               // the last memEntry.used given out

	evictedKey, evictedGlobal atomic.Int64

	parked parked // Parker
}

type memEntry struct {
	r     *Response
	bytes int64
	keyEl *list.Element // in keys[r.Quota].lru
	used  uint64        // when it moved to the front of lru last: a larger one is more recent
}

// keyUsage is what one quota key holds.
type keyUsage struct {
	lru   *list.List // of *list.Element of Memory.lru, most recent at the front
	bytes int64
}

// NewMemory returns a Memory holding at most maxCount responses and about maxBytes bytes
// (Size); zero values mean DefaultResponses and DefaultBytes.
func NewMemory(maxCount int, maxBytes int64) *Memory {
	if maxCount <= 0 {
		maxCount = DefaultResponses
	}
	if maxBytes <= 0 {
		maxBytes = DefaultBytes
	}
	return &Memory{maxCount: maxCount, maxBytes: maxBytes, byID: make(map[string]*list.Element), lru: list.New(),
		keys: make(map[string]*keyUsage), items: make(map[itemKey]holders)}
}

// KeyQuotas is implemented by a store that can bound what each quota key (Response.Quota)
// holds, as Memory does; the server applies -key-store-responses and -key-store-bytes to a
// store that implements it, whoever opened the store.
type KeyQuotas interface {
	// Bounds returns the store's own bounds: responses and bytes (Size).
	Bounds() (responses int, bytes int64)
	// SetKeyQuota sets the per-key quotas: responses and bytes (Size) one quota key may
	// hold; 0 means no quota. It is called before the store is used.
	SetKeyQuota(responses int, bytes int64)
}

// Bounds returns the store's bounds: responses and bytes (Size).
func (s *Memory) Bounds() (responses int, bytes int64) { return s.maxCount, s.maxBytes }

// SetKeyQuota sets the per-key quotas: responses and bytes (Size) one quota key
// (Response.Quota) may hold; 0 means no quota. Call it before use.
func (s *Memory) SetKeyQuota(count int, bytes int64) {
	s.keyCount, s.keyBytes = count, bytes
}

// KeyQuota returns the per-key quotas SetKeyQuota set: responses and bytes (0: none).
func (s *Memory) KeyQuota() (responses int, bytes int64) { return s.keyCount, s.keyBytes }

// Evictions reports how many responses were evicted over their key's quota (key) and over
// the store's bounds (global).
func (s *Memory) Evictions() (key, global int64) {
	return s.evictedKey.Load(), s.evictedGlobal.Load()
}

// Bytes reports the bytes (Size) of the stored responses.
func (s *Memory) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Put stores r, replacing an earlier version, and evicts the least recently used responses
// beyond the bounds: first those of r's quota key over its quota, then any beyond the store's
// bounds, but never r itself (a response larger than a bound alone is kept, alone).
func (s *Memory) Put(_ context.Context, r *Response) error {
	e := &memEntry{r: r, bytes: Size(r)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byID[r.Response.ID]; ok {
		s.removeLocked(old)
	}
	s.clock++
	e.used = s.clock
	el := s.lru.PushFront(e)
	s.byID[r.Response.ID] = el
	s.indexLocked(e)
	s.bytes += e.bytes
	k := s.keys[r.Quota]
	if k == nil {
		k = &keyUsage{lru: list.New()}
		s.keys[r.Quota] = k
	}
	e.keyEl = k.lru.PushFront(el)
	k.bytes += e.bytes
	for k.lru.Len() > 1 && ((s.keyCount > 0 && k.lru.Len() > s.keyCount) || (s.keyBytes > 0 && k.bytes > s.keyBytes)) {
		s.removeLocked(k.lru.Back().Value.(*list.Element))
		s.evictedKey.Add(1)
	}
	for s.lru.Len() > 1 && (s.lru.Len() > s.maxCount || s.bytes > s.maxBytes) {
		s.removeLocked(s.lru.Back())
		s.evictedGlobal.Add(1)
	}
	return nil
}

// removeLocked drops the entry of el from both orders.
func (s *Memory) removeLocked(el *list.Element) {
	e := el.Value.(*memEntry)
	s.lru.Remove(el)
	delete(s.byID, e.r.Response.ID)
	s.unindexLocked(e)
	s.bytes -= e.bytes
	if k := s.keys[e.r.Quota]; k != nil {
		k.lru.Remove(e.keyEl)
		k.bytes -= e.bytes
		if k.lru.Len() == 0 {
			delete(s.keys, e.r.Quota)
		}
	}
}

// getLocked returns the entry of id for owner and marks it recently used; a non-owner
// changes nothing.
func (s *Memory) getLocked(id, owner string) (*Response, bool) {
	el, ok := s.byID[id]
	if !ok || el.Value.(*memEntry).r.Owner != owner {
		return nil, false
	}
	s.lru.MoveToFront(el)
	e := el.Value.(*memEntry)
	s.clock++
	e.used = s.clock
	if k := s.keys[e.r.Quota]; k != nil {
		k.lru.MoveToFront(e.keyEl)
	}
	return e.r, true
}

// Get returns the stored response id of owner.
func (s *Memory) Get(_ context.Context, id, owner string) (*Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.getLocked(id, owner)
	if !ok {
		return nil, ErrNotFound
	}
	return r, nil
}

// Delete removes the stored response id of owner.
func (s *Memory) Delete(_ context.Context, id, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok || el.Value.(*memEntry).r.Owner != owner {
		return ErrNotFound
	}
	s.removeLocked(el)
	return nil
}

// InputItems returns one page of the input items of id.
func (s *Memory) InputItems(ctx context.Context, id, owner string, p Page) (ItemList, error) {
	r, err := s.Get(ctx, id, owner)
	if err != nil {
		return ItemList{}, err
	}
	return paginate(r.Input, p)
}

// Chain returns the items of the chain ending at id, walking parents under one lock.
func (s *Memory) Chain(_ context.Context, id, owner string) ([]protocol.Item, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var links []link
	for cur := id; cur != ""; {
		r, ok := s.getLocked(cur, owner)
		if !ok {
			return nil, &MissingError{ID: cur}
		}
		links = append(links, link{input: r.Input, output: r.Response.Output, chain: r.Chain})
		if r.Chain != nil || len(links) > MaxChainLinks {
			break
		}
		cur = ""
		if r.Response.PreviousResponseID != nil {
			cur = *r.Response.PreviousResponseID
		}
	}
	if len(links) > MaxChainLinks {
		return nil, errChainTooLong
	}
	return assemble(links), nil
}

// Len reports the number of stored responses.
func (s *Memory) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// Close does nothing.
func (s *Memory) Close() error { return nil }
