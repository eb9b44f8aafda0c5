package compat

import (
	"container/list"
	"sync"

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
	// Chain, when set, is the whole chain through this response (ancestors' items, Input and
	// output, in context order): an append-shape rollout interleaves inputs and outputs, so its
	// chain cannot be rebuilt from Input followed by output.
	Chain []protocol.Item
}

// Store keeps stored responses (architecture §2 compat, §3). Implementations are safe for
// concurrent use. Get returns false for an unknown or deleted id; Delete reports whether id
// existed.
type Store interface {
	Put(r *StoredResponse)
	Get(id string) (*StoredResponse, bool)
	Delete(id string) bool
}

// Defaults of MemoryStore.
const (
	DefaultStoreResponses = 10000
	DefaultStoreBytes     = 256 << 20
)

// MemoryStore is the default Store: in memory, bounded by a count and an estimate of bytes
// (item text plus a fixed overhead), evicting the least recently used response first.
type MemoryStore struct {
	maxCount int
	maxBytes int64

	mu    sync.Mutex // guards the fields below
	byID  map[string]*list.Element
	lru   *list.List // of *storeEntry, most recent at the front
	bytes int64
}

type storeEntry struct {
	r     *StoredResponse
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
	return &MemoryStore{maxCount: maxCount, maxBytes: maxBytes, byID: make(map[string]*list.Element), lru: list.New()}
}

// Put stores r under r.Response.ID, replacing an earlier version.
func (s *MemoryStore) Put(r *StoredResponse) {
	e := &storeEntry{r: r, bytes: storedBytes(r)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byID[r.Response.ID]; ok {
		s.bytes -= old.Value.(*storeEntry).bytes
		s.lru.Remove(old)
	}
	s.byID[r.Response.ID] = s.lru.PushFront(e)
	s.bytes += e.bytes
	for s.lru.Len() > 1 && (s.lru.Len() > s.maxCount || s.bytes > s.maxBytes) {
		last := s.lru.Back()
		le := last.Value.(*storeEntry)
		s.lru.Remove(last)
		delete(s.byID, le.r.Response.ID)
		s.bytes -= le.bytes
	}
}

// Get returns the stored response id.
func (s *MemoryStore) Get(id string) (*StoredResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	s.lru.MoveToFront(el)
	return el.Value.(*storeEntry).r, true
}

// Delete removes id.
func (s *MemoryStore) Delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byID[id]
	if !ok {
		return false
	}
	s.bytes -= el.Value.(*storeEntry).bytes
	s.lru.Remove(el)
	delete(s.byID, id)
	return true
}

// Len reports the number of stored responses.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}

func storedBytes(r *StoredResponse) int64 {
	return 512 + session.ItemsBytes(r.Input) + session.ItemsBytes(r.Response.Output) + session.ItemsBytes(r.Chain)
}

// ChainFromStore returns the items of the chain that ends with the stored response id (every
// ancestor's input and output, in context order), or false when id or an ancestor is not in s
// or belongs to another owner. It serves session.Options.Lookup for the append shape.
func ChainFromStore(s Store, id, owner string) ([]protocol.Item, bool) {
	return chainFromStore(s, id, owner)
}

// SaveAppend stores an append-shape rollout (session.Options.Save) for owner.
func SaveAppend(s Store, owner string, r *protocol.Response, input, chain []protocol.Item) {
	s.Put(&StoredResponse{Response: *r, Input: withIDs(input), Owner: owner, Chain: chain})
}

// chainFromStore rebuilds the items of the chain ending at id (every ancestor's input and
// output, oldest first), or reports false when id or an ancestor is not stored, or owner
// differs.
func chainFromStore(s Store, id, owner string) ([]protocol.Item, bool) {
	var links []*StoredResponse
	var prefix []protocol.Item
	for cur := id; cur != ""; {
		r, ok := s.Get(cur)
		if !ok || r.Owner != owner {
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

// FindItem implements ItemFinder: it scans the stored responses of owner (their input and
// output items) for id, O(stored items).
func (s *MemoryStore) FindItem(id, owner string) (protocol.Item, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for el := s.lru.Front(); el != nil; el = el.Next() {
		r := el.Value.(*storeEntry).r
		if r.Owner != owner {
			continue
		}
		for _, items := range [][]protocol.Item{r.Input, r.Response.Output} {
			for i := range items {
				if items[i].ID == id {
					return items[i], true
				}
			}
		}
	}
	return protocol.Item{}, false
}
