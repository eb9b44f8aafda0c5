package compat

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// StoredResponse is one stored Response (store:true): the Response object as last sent, the
// input items of its request (for GET /v1/responses/{id}/input_items), and its parent, so that
// a chain is rebuilt by walking PreviousResponseID.
type StoredResponse struct {
	Response protocol.Response
	// Input are the request's input items (with ids).
	Input []protocol.Item
	// Owner is the API key that created it ("" when the server is open).
	Owner string
	// Quota is the key its size is counted against for the per-key store quotas: Owner, or
	// the client's address when the server is open.
	Quota string
	// Chain, when set, is the whole chain through this response (ancestors' items, Input and
	// output, in context order): an append-shape rollout interleaves inputs and outputs, so its
	// chain cannot be rebuilt from Input followed by output.
	Chain []protocol.Item
}

// Store keeps stored responses (architecture §2 compat, §3). Implementations are safe for
// concurrent use. Get returns false for an unknown or deleted id; Delete reports whether id
// existed. Get must not change what is evicted next: a lookup by someone who does not own the
// response touches nothing; an owner's use is reported with Touch (Toucher).
type Store interface {
	Put(r *StoredResponse)
	Get(id string) (*StoredResponse, bool)
	Delete(id string) bool
}

// Toucher is implemented by stores with an eviction order: Touch marks id as just used (after
// its owner looked it up).
type Toucher interface {
	Touch(id string)
}

// Defaults of MemoryStore.
const (
	DefaultStoreResponses = 10000
	DefaultStoreBytes     = 256 << 20
)

// MemoryStore is the default Store: in memory, bounded by a count and by bytes (StoredBytes:
// items, tools, instructions and other settings), evicting the least recently used response
// first. With per-key quotas (SetKeyQuota), a Put over its key's quota evicts that key's own
// least recently used responses, so that one key cannot evict another's.
type MemoryStore struct {
	maxCount int
	maxBytes int64
	keyCount int   // per Quota key; 0: none
	keyBytes int64 // per Quota key; 0: none

	mu    sync.Mutex // guards the fields below
	byID  map[string]*list.Element
	lru   *list.List // of *storeEntry, most recent at the front
	bytes int64
	keys  map[string]*keyUsage // by Quota; an entry is deleted when its key holds nothing

	evictedKey, evictedGlobal, refused atomic.Int64
}

type storeEntry struct {
	r     *StoredResponse
	bytes int64
	keyEl *list.Element // in keys[r.Quota].lru
}

// keyUsage is what one Quota key holds.
type keyUsage struct {
	lru   *list.List // of *list.Element of MemoryStore.lru, most recent at the front
	bytes int64
}

// NewMemoryStore returns a MemoryStore holding at most maxCount responses and about maxBytes
// bytes; zero values mean DefaultStoreResponses and DefaultStoreBytes.
func NewMemoryStore(maxCount int, maxBytes int64) *MemoryStore {
	if maxCount <= 0 {
		maxCount = DefaultStoreResponses
	}
	if maxBytes <= 0 {
		maxBytes = DefaultStoreBytes
	}
	return &MemoryStore{maxCount: maxCount, maxBytes: maxBytes, byID: make(map[string]*list.Element),
		lru: list.New(), keys: make(map[string]*keyUsage)}
}

// SetKeyQuota sets the per-key quotas: responses and bytes one Quota key may hold (0: no
// quota). Call it before use.
func (s *MemoryStore) SetKeyQuota(count int, bytes int64) {
	s.keyCount, s.keyBytes = count, bytes
}

// Put stores r under r.Response.ID, replacing an earlier version. A response larger than the
// store's byte bound (or its key's byte quota) is not stored.
func (s *MemoryStore) Put(r *StoredResponse) {
	e := &storeEntry{r: r, bytes: StoredBytes(r)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byID[r.Response.ID]; ok {
		s.removeLocked(old)
	}
	if e.bytes > s.maxBytes || (s.keyBytes > 0 && e.bytes > s.keyBytes) {
		s.refused.Add(1)
		return
	}
	el := s.lru.PushFront(e)
	s.byID[r.Response.ID] = el
	s.bytes += e.bytes
	k := s.keys[r.Quota]
	if k == nil {
		k = &keyUsage{lru: list.New()}
		s.keys[r.Quota] = k
	}
	e.keyEl = k.lru.PushFront(el)
	k.bytes += e.bytes
	for (s.keyCount > 0 && k.lru.Len() > s.keyCount) || (s.keyBytes > 0 && k.bytes > s.keyBytes) {
		s.removeLocked(k.lru.Back().Value.(*list.Element))
		s.evictedKey.Add(1)
	}
	for s.lru.Len() > s.maxCount || s.bytes > s.maxBytes {
		s.removeLocked(s.lru.Back())
		s.evictedGlobal.Add(1)
	}
}

// removeLocked drops the entry of el from both orders.
func (s *MemoryStore) removeLocked(el *list.Element) {
	e := el.Value.(*storeEntry)
	s.lru.Remove(el)
	delete(s.byID, e.r.Response.ID)
	s.bytes -= e.bytes
	if k := s.keys[e.r.Quota]; k != nil {
		k.lru.Remove(e.keyEl)
		k.bytes -= e.bytes
		if k.lru.Len() == 0 {
			delete(s.keys, e.r.Quota)
		}
	}
}

// Get returns the stored response id. It does not change the eviction order (see Touch).
func (s *MemoryStore) Get(id string) (*StoredResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	return el.Value.(*storeEntry).r, true
}

// Touch marks id as just used, so that it is evicted last.
func (s *MemoryStore) Touch(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok {
		return
	}
	s.lru.MoveToFront(el)
	e := el.Value.(*storeEntry)
	if k := s.keys[e.r.Quota]; k != nil {
		k.lru.MoveToFront(e.keyEl)
	}
}

// Delete removes id.
func (s *MemoryStore) Delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok {
		return false
	}
	s.removeLocked(el)
	return true
}

// Len reports the number of stored responses.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

// Evictions reports how many responses were evicted over their key's quota (key), over the
// store's bounds (global), and not stored because they alone exceed a byte bound (refused).
func (s *MemoryStore) Evictions() (key, global, refused int64) {
	return s.evictedKey.Load(), s.evictedGlobal.Load(), s.refused.Load()
}

// Bytes reports the bytes of the stored responses (StoredBytes).
func (s *MemoryStore) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// StoredBytes estimates the memory of a stored response: its input items, its Response
// (output items, tools, instructions, metadata and other settings) and its chain, plus a
// fixed overhead. It is the unit of -store-bytes.
func StoredBytes(r *StoredResponse) int64 {
	return 512 + session.ItemsBytes(r.Input) + session.ResponseBytes(&r.Response) + session.ItemsBytes(r.Chain)
}

// get returns the stored response id if owner owns it, marking it used; a lookup by another
// owner touches nothing.
func get(s Store, id, owner string) (*StoredResponse, bool) {
	r, ok := s.Get(id)
	if !ok || r.Owner != owner {
		return nil, false
	}
	if t, ok := s.(Toucher); ok {
		t.Touch(id)
	}
	return r, true
}

// ChainFromStore returns the items of the chain that ends with the stored response id (every
// ancestor's input and output, in context order), or false when id or an ancestor is not in s
// or belongs to another owner. It serves session.Options.Lookup for the append shape.
func ChainFromStore(s Store, id, owner string) ([]protocol.Item, bool) {
	return chainFromStore(s, id, owner)
}

// SaveAppend stores an append-shape rollout (session.Options.Save) for owner, counted
// against the quota key quota.
func SaveAppend(s Store, owner, quota string, r *protocol.Response, input, chain []protocol.Item) {
	s.Put(&StoredResponse{Response: *r, Input: withIDs(input), Owner: owner, Quota: quota, Chain: chain})
}

// chainFromStore rebuilds the items of the chain ending at id (every ancestor's input and
// output, oldest first), or reports false when id or an ancestor is not stored, or owner
// differs.
func chainFromStore(s Store, id, owner string) ([]protocol.Item, bool) {
	var links []*StoredResponse
	var prefix []protocol.Item
	for cur := id; cur != ""; {
		r, ok := get(s, cur, owner)
		if !ok {
			return nil, false
		}
		if r.Chain != nil {
			if len(links) == 0 {
				return r.Chain[:len(r.Chain):len(r.Chain)], true
			}
			prefix = r.Chain
			break
		}
		links = append(links, r)
		if len(links) > 100000 {
			return nil, false
		}
		cur = ""
		if r.Response.PreviousResponseID != nil {
			cur = *r.Response.PreviousResponseID
		}
	}
	items := append([]protocol.Item(nil), prefix...)
	for i := len(links) - 1; i >= 0; i-- {
		items = append(items, links[i].Input...)
		items = append(items, links[i].Response.Output...)
	}
	return items, true
}
