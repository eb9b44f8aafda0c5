package store

import (
	"container/list"
	"context"
	"sync"

	"github.com/tetherd/tether/protocol"
)

// Defaults of the byte and count bounds (-store-responses, -store-bytes).
const (
	DefaultResponses = 10000
	DefaultBytes     = 256 << 20
)

// Memory is the default Store: in this process, bounded by a count and by Size, evicting the
// least recently used response first. Its calls never fail with anything but ErrNotFound and
// ErrCursorNotFound.
type Memory struct {
	maxCount int
	maxBytes int64

	mu    sync.Mutex // guards the fields below
	byID  map[string]*list.Element
	lru   *list.List // of *memEntry, most recent at the front
	bytes int64
}

type memEntry struct {
	r     *Response
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
	return &Memory{maxCount: maxCount, maxBytes: maxBytes, byID: make(map[string]*list.Element), lru: list.New()}
}

// Put stores r, replacing an earlier version, and evicts the least recently used responses
// beyond the bounds (never r itself).
func (s *Memory) Put(_ context.Context, r *Response) error {
	e := &memEntry{r: r, bytes: Size(r)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.byID[r.Response.ID]; ok {
		s.bytes -= old.Value.(*memEntry).bytes
		s.lru.Remove(old)
	}
	s.byID[r.Response.ID] = s.lru.PushFront(e)
	s.bytes += e.bytes
	for s.lru.Len() > 1 && (s.lru.Len() > s.maxCount || s.bytes > s.maxBytes) {
		s.removeLocked(s.lru.Back())
	}
	return nil
}

func (s *Memory) removeLocked(el *list.Element) {
	e := el.Value.(*memEntry)
	s.lru.Remove(el)
	delete(s.byID, e.r.Response.ID)
	s.bytes -= e.bytes
}

// getLocked returns the entry of id for owner and marks it recently used; a non-owner
// changes nothing.
func (s *Memory) getLocked(id, owner string) (*Response, bool) {
	el, ok := s.byID[id]
	if !ok || el.Value.(*memEntry).r.Owner != owner {
		return nil, false
	}
	s.lru.MoveToFront(el)
	return el.Value.(*memEntry).r, true
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
			return nil, ErrNotFound
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
