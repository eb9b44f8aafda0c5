package session

import (
	"context"
	"math"
	"sync"
	"time"
)

// DefaultKeyShare is the default fraction of a shared capacity (decoding slots, the memory
// budget's decoding bytes, chat completion slots) that one key may hold while another key is
// active.
const DefaultKeyShare = 0.5

// ShareWindow is how long a key counts as active after its last admission or refusal (besides
// while it holds something): a key that was refused because another key took everything makes
// that key keep to its share for this long.
const ShareWindow = 30 * time.Second

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

// shares tracks what each key holds of a Budget (decoding slots and bytes) and when each was
// last active, so that a key over its share is refused while another key is active.
type shares struct {
	share float64
	now   func() time.Time

	mu     sync.Mutex
	held   map[string]*keyHold // keys holding something
	recent [2]seen             // the two most recently active distinct keys
}

// keyHold is what one key holds.
type keyHold struct {
	slots int64
	bytes int64
}

// seen is one key's last activity.
type seen struct {
	key string
	at  time.Time
}

// touch records key as active now. Called with mu held.
func (s *shares) touch(key string) {
	now := s.now()
	if s.recent[0].key == key {
		s.recent[0].at = now
		return
	}
	s.recent[1] = s.recent[0]
	s.recent[0] = seen{key, now}
}

// othersActive reports whether a key other than key holds something or was active within
// ShareWindow. Called with mu held.
func (s *shares) othersActive(key string) bool {
	n := len(s.held)
	if _, ok := s.held[key]; ok {
		n--
	}
	if n > 0 {
		return true
	}
	now := s.now()
	for _, r := range s.recent {
		if r.key != "" && r.key != key && now.Sub(r.at) < ShareWindow {
			return true
		}
	}
	return false
}

// take adds slots and bytes to key's holding when that keeps key within its share (maxSlots,
// maxBytes; ≤ 0: unbounded) or no other key is active; false (key marked active) otherwise.
func (s *shares) take(key string, slots, bytes, maxSlots, maxBytes int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[key]
	if h == nil {
		h = &keyHold{}
	}
	over := maxSlots > 0 && slots > 0 && h.slots+slots > ShareOf(s.share, maxSlots) ||
		maxBytes > 0 && bytes > 0 && h.bytes+bytes > ShareOf(s.share, maxBytes)
	// A key holding nothing may always take one body: a share smaller than one body must not
	// lock a key out.
	if over && (h.slots > 0 || h.bytes > 0) && s.othersActive(key) {
		s.touch(key)
		return false
	}
	s.touch(key)
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
