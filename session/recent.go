package session

import (
	"math"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Recent is the one structure that keeps ended chains for previous_response_id: a
// connection's ended rollouts and the Responses its shape keeps (Conn.KeepResponse). It is a least recently
// used list of values by key (github.com/hashicorp/golang-lru/v2's simplelru) with a running
// estimate of the bytes they hold. It does not evict on its own: its owner evicts Oldest
// while it is over its bounds, at O(1) per eviction. Not safe for concurrent use: its owner's
// mutex guards it. Make one with NewRecent.
type Recent[V any] struct {
	lru   *simplelru.LRU[string, recentEntry[V]]
	bytes int64
}

type recentEntry[V any] struct {
	v     V
	bytes int64
}

// NewRecent returns an empty Recent.
func NewRecent[V any]() *Recent[V] {
	lru, err := simplelru.NewLRU[string, recentEntry[V]](math.MaxInt, nil) // unbounded: the owner evicts
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &Recent[V]{lru: lru}
}

// Put adds key (or replaces its value) as the most recently used entry, holding about bytes.
func (r *Recent[V]) Put(key string, v V, bytes int64) {
	if old, ok := r.lru.Peek(key); ok {
		r.bytes -= old.bytes
	}
	r.lru.Add(key, recentEntry[V]{v: v, bytes: bytes})
	r.bytes += bytes
}

// Get returns the value of key and makes it the most recently used entry.
func (r *Recent[V]) Get(key string) (v V, ok bool) {
	e, ok := r.lru.Get(key)
	return e.v, ok
}

// Peek returns the value of key without changing its recency.
func (r *Recent[V]) Peek(key string) (v V, ok bool) {
	e, ok := r.lru.Peek(key)
	return e.v, ok
}

// Remove forgets key and returns its value; ok is false when it was not there.
func (r *Recent[V]) Remove(key string) (v V, ok bool) {
	e, ok := r.lru.Peek(key)
	if !ok {
		return v, false
	}
	r.lru.Remove(key)
	r.bytes -= e.bytes
	return e.v, true
}

// Oldest returns the least recently used entry; ok is false when Recent is empty.
func (r *Recent[V]) Oldest() (key string, v V, ok bool) {
	key, e, ok := r.lru.GetOldest()
	return key, e.v, ok
}

// Len is the number of entries.
func (r *Recent[V]) Len() int { return r.lru.Len() }

// Bytes is the sum of the entries' byte estimates (Put).
func (r *Recent[V]) Bytes() int64 { return r.bytes }

// Each calls f with every value, least recently used first, until f returns false. It does
// not change recency.
func (r *Recent[V]) Each(f func(v V) bool) {
	for _, e := range r.lru.Values() {
		if !f(e.v) {
			return
		}
	}
}
