package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Parker is an optional interface of a Store: it keeps parked rollouts (a suspended rollout's
// whole state, one opaque value) so that any instance sharing the store can resume one, and
// exactly one does. Memory and Redis implement it (Guarded when the store it wraps does; see
// ParkerOf). Values are not counted toward the store's bounds: each lives at most its ttl.
type Parker interface {
	// Park keeps value as the parked rollout id of owner for ttl (> 0), replacing an earlier
	// one. Errors: ErrBadTTL for ttl <= 0, else a store failure.
	Park(ctx context.Context, owner, id string, value []byte, ttl time.Duration) error
	// Claim takes the parked rollout id of owner out of the store and returns its value:
	// atomically, so that of callers racing for one value exactly one gets it. ErrNotFound
	// when there is none (never parked, already claimed, expired, or another owner's).
	Claim(ctx context.Context, owner, id string) ([]byte, error)
	// Replace is Park of a value that must still be there: it replaces the parked rollout id
	// of owner and sets its ttl (> 0) only if it has not been claimed (nor has expired),
	// atomically. ErrNotFound when it is gone, ErrBadTTL for ttl <= 0, else a store failure.
	Replace(ctx context.Context, owner, id string, value []byte, ttl time.Duration) error
}

// ErrBadTTL is returned by Parker.Park for a ttl that is not positive.
var ErrBadTTL = errors.New("store: a parked rollout needs a positive ttl")

// ParkerOf returns s as a Parker, looking through Guarded; ok is false when s keeps no
// parked rollouts.
func ParkerOf(s Store) (p Parker, ok bool) {
	if g, isG := s.(*Guarded); isG {
		if _, ok := g.s.(Parker); !ok {
			return nil, false
		}
		return g, true
	}
	p, ok = s.(Parker)
	return p, ok
}

// Park implements Parker for a Guarded whose store is a Parker (ParkerOf), under the timeout;
// ErrNotParker otherwise.
func (g *Guarded) Park(ctx context.Context, owner, id string, value []byte, ttl time.Duration) error {
	p, ok := g.s.(Parker)
	if !ok {
		return ErrNotParker
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	err := p.Park(ctx, owner, id, value, ttl)
	if errors.Is(err, ErrBadTTL) {
		return err
	}
	return g.check("park", id, err)
}

// Claim implements Parker for a Guarded whose store is a Parker (ParkerOf), under the
// timeout; ErrNotParker otherwise.
func (g *Guarded) Claim(ctx context.Context, owner, id string) ([]byte, error) {
	p, ok := g.s.(Parker)
	if !ok {
		return nil, ErrNotParker
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	v, err := p.Claim(ctx, owner, id)
	return v, g.check("claim", id, err)
}

// Replace implements Parker for a Guarded whose store is a Parker (ParkerOf), under the
// timeout; ErrNotParker otherwise.
func (g *Guarded) Replace(ctx context.Context, owner, id string, value []byte, ttl time.Duration) error {
	p, ok := g.s.(Parker)
	if !ok {
		return ErrNotParker
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	err := p.Replace(ctx, owner, id, value, ttl)
	if errors.Is(err, ErrBadTTL) {
		return err
	}
	return g.check("replace", id, err)
}

// ErrNotParker is returned by Guarded's Park and Claim when the store it wraps is no Parker.
var ErrNotParker = errors.New("store: this store keeps no parked rollouts")

// parked is Memory's table of parked rollouts.
type parked struct {
	mu    sync.Mutex
	byKey map[parkKey]parkedValue
	puts  int // Parks since the last sweep of expired values
}

type parkKey struct{ owner, id string }

type parkedValue struct {
	value   []byte
	expires time.Time
}

// Park implements Parker.
func (s *Memory) Park(_ context.Context, owner, id string, value []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return ErrBadTTL
	}
	p := &s.parked
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.byKey == nil {
		p.byKey = make(map[parkKey]parkedValue)
	}
	// Expired values are dropped as Parks go by: at most as many sweeps as Parks, each over
	// a table at least as large as the Parks since the last one.
	if p.puts++; p.puts >= len(p.byKey) {
		p.puts = 0
		for k, v := range p.byKey {
			if !now.Before(v.expires) {
				delete(p.byKey, k)
			}
		}
	}
	p.byKey[parkKey{owner, id}] = parkedValue{value: append([]byte(nil), value...), expires: now.Add(ttl)}
	return nil
}

// Claim implements Parker.
func (s *Memory) Claim(_ context.Context, owner, id string) ([]byte, error) {
	p := &s.parked
	p.mu.Lock()
	defer p.mu.Unlock()
	k := parkKey{owner, id}
	v, ok := p.byKey[k]
	if !ok {
		return nil, ErrNotFound
	}
	delete(p.byKey, k)
	if !time.Now().Before(v.expires) {
		return nil, ErrNotFound
	}
	return v.value, nil
}

// Replace implements Parker.
func (s *Memory) Replace(_ context.Context, owner, id string, value []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return ErrBadTTL
	}
	p := &s.parked
	p.mu.Lock()
	defer p.mu.Unlock()
	k := parkKey{owner, id}
	v, ok := p.byKey[k]
	now := time.Now()
	if !ok || !now.Before(v.expires) {
		delete(p.byKey, k)
		return ErrNotFound
	}
	p.byKey[k] = parkedValue{value: append([]byte(nil), value...), expires: now.Add(ttl)}
	return nil
}

// parkedKey is the Redis key of the parked rollout id of owner: <prefix>p:<owner>:<id>, the
// owner escaped as in responses' keys.
func (s *Redis) parkedKey(owner, id string) string {
	return s.o.Prefix + "p:" + url.QueryEscape(owner) + ":" + id
}

// Park implements Parker: SET with the ttl (PX), one round trip.
func (s *Redis) Park(ctx context.Context, owner, id string, value []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return ErrBadTTL
	}
	if ttl < time.Millisecond {
		ttl = time.Millisecond
	}
	if err := s.c.Set(ctx, s.parkedKey(owner, id), value, ttl).Err(); err != nil {
		return fmt.Errorf("store: redis park: %w", err)
	}
	return nil
}

// Claim implements Parker: GETDEL, atomic in Redis, so exactly one of racing instances gets
// the value.
func (s *Redis) Claim(ctx context.Context, owner, id string) ([]byte, error) {
	v, err := s.c.GetDel(ctx, s.parkedKey(owner, id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: redis claim: %w", err)
	}
	return v, nil
}

// Replace implements Parker: SET … XX with the ttl (PX), one round trip, atomic in Redis.
func (s *Redis) Replace(ctx context.Context, owner, id string, value []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return ErrBadTTL
	}
	ttl = max(ttl, time.Millisecond)
	ok, err := s.c.SetXX(ctx, s.parkedKey(owner, id), value, ttl).Result()
	if err != nil {
		return fmt.Errorf("store: redis replace: %w", err)
	}
	if !ok {
		return ErrNotFound
	}
	return nil
}
