package session

import (
	"context"
	"math"
	"sync"
)

// DefaultKeyShare is the default fraction of a shared capacity (decoding slots, the memory
// budget's decoding bytes, chat completion slots) that one key may hold.
const DefaultKeyShare = 0.5

// shareKey is the context key of WithShareKey.
type shareKey struct{}

// WithShareKey returns ctx carrying key (QuotaKey): the key whose share of the server's shared
// capacity a request's reservations count against.
func WithShareKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, shareKey{}, key)
}

// ShareKeyFrom returns the key set by WithShareKey, or "" (no share: only the global bounds).
func ShareKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(shareKey{}).(string)
	return k
}

// ShareOf is the most of capacity that one key may hold under share (a fraction in (0, 1]):
// ⌈share·capacity⌉, at least 1.
func ShareOf(share float64, capacity int64) int64 {
	return max(int64(math.Ceil(share*float64(capacity))), 1)
}

// shares tracks what each key holds of a Budget (decoding slots and bytes).
type shares struct {
	share float64

	mu   sync.Mutex
	held map[string]*keyHold // keys holding something
}

// keyHold is what one key holds.
type keyHold struct {
	slots int64
	bytes int64
}

// take adds slots and bytes to key's holding when that keeps key within its share (maxSlots,
// maxBytes; ≤ 0: unbounded), or when key holds none of it besides own bytes of the
// reservation that grows (one body always fits a share, be the share smaller than it); false
// otherwise.
func (s *shares) take(key string, slots, bytes, own, maxSlots, maxBytes int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[key]
	if h == nil {
		h = &keyHold{}
	}
	if maxSlots > 0 && slots > 0 && h.slots > 0 && h.slots+slots > ShareOf(s.share, maxSlots) ||
		maxBytes > 0 && bytes > 0 && h.bytes > own && h.bytes+bytes > ShareOf(s.share, maxBytes) {
		return false
	}
	h.slots += slots
	h.bytes += bytes
	if h.slots > 0 || h.bytes > 0 {
		s.held[key] = h
	}
	return true
}

// give returns slots and bytes of key's holding.
func (s *shares) give(key string, slots, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[key]
	if h == nil {
		return
	}
	h.slots -= slots
	h.bytes -= bytes
	if h.slots <= 0 && h.bytes <= 0 {
		delete(s.held, key)
	}
}
