package session

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/tetherd/tether/protocol"
)

// KeyLimit bounds what each quota key (QuotaKey: an API key, or a client address on an open
// server) holds at once, e.g. live rollouts or WebSocket connections. A key's entry is deleted
// when it holds nothing, so the map grows only with keys that hold something. A nil *KeyLimit
// admits everything. Safe for concurrent use.
type KeyLimit struct {
	max  int
	what string // for the error message, e.g. "live rollouts"

	mu sync.Mutex // guards n
	n  map[string]int
	// Rejected counts refused acquisitions.
	Rejected atomic.Int64
}

// NewKeyLimit returns a KeyLimit of max per key, what naming the unit in errors ("live
// rollouts"); max ≤ 0 returns nil (no limit).
func NewKeyLimit(max int, what string) *KeyLimit {
	if max <= 0 {
		return nil
	}
	return &KeyLimit{max: max, what: what, n: make(map[string]int)}
}

// Acquire takes one unit for key, or returns quota_exceeded (429) when key holds its maximum.
func (l *KeyLimit) Acquire(key string) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] >= l.max {
		l.Rejected.Add(1)
		return protocol.Errorf(http.StatusTooManyRequests, protocol.CodeQuotaExceeded, "",
			"%s", fmt.Sprintf("This API key (or client address) holds its quota of %d %s: finish or close some first.", l.max, l.what))
	}
	l.n[key]++
	return nil
}

// Release returns one unit of key.
func (l *KeyLimit) Release(key string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] <= 1 {
		delete(l.n, key)
		return
	}
	l.n[key]--
}

// Held reports the units key holds now.
func (l *KeyLimit) Held(key string) int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}

// Max reports the most each key may hold (0 for a nil KeyLimit: no limit).
func (l *KeyLimit) Max() int {
	if l == nil {
		return 0
	}
	return l.max
}

// RejectedCount reports Rejected (0 for a nil KeyLimit).
func (l *KeyLimit) RejectedCount() int64 {
	if l == nil {
		return 0
	}
	return l.Rejected.Load()
}
