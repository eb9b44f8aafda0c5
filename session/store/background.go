package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// BackgroundEvent is one kept event of a background response in a BackgroundKeeper: its
// sequence_number, its type and its encoded data (the JSON of the event).
type BackgroundEvent struct {
	Seq  int
	Type string
	Data []byte
}

// BackgroundKeeper is an optional interface of a Store shared by a deployment: it keeps the
// record of each running or recently ended background response (an opaque value its running
// instance rewrites), the bounded log of its events, and a cancel request any instance may
// leave for the running one. Redis implements it (Guarded when the store it wraps does; see
// BackgroundOf); Memory does not, since only one instance reads it. Nothing of it counts
// toward the store's bounds: each key lives at most its ttl.
type BackgroundKeeper interface {
	// SaveBackground writes rec as the record of background response id of owner, appends
	// events (in sequence_number order; those at or below the last kept one are skipped, so a
	// retried save does not repeat them), drops the kept events before sequence_number
	// first, sets ttl (> 0) on the record and the events, and reports whether a cancel of
	// the response was requested (CancelBackground): one atomic step. Errors: ErrBadTTL,
	// else a store failure.
	SaveBackground(ctx context.Context, owner, id string, rec []byte, events []BackgroundEvent, first int, ttl time.Duration) (cancel bool, err error)
	// LoadBackground returns the record of background response id of owner and at most max
	// (≥ 0) of its kept events after sequence_number after, oldest first, read together.
	// ErrNotFound when there is no record (never written, expired, deleted, or another
	// owner's).
	LoadBackground(ctx context.Context, owner, id string, after, max int) (rec []byte, events []BackgroundEvent, err error)
	// CancelBackground leaves a cancel request for background response id of owner, kept
	// for ttl (> 0); SaveBackground reports it to the running instance.
	CancelBackground(ctx context.Context, owner, id string, ttl time.Duration) error
	// DeleteBackground removes the record, events and cancel request of id of owner; none
	// there is no error.
	DeleteBackground(ctx context.Context, owner, id string) error
}

// BackgroundOf returns s as a BackgroundKeeper, looking through Guarded; ok is false when s
// keeps no background responses.
func BackgroundOf(s Store) (k BackgroundKeeper, ok bool) {
	if g, isG := s.(*Guarded); isG {
		if _, ok := g.s.(BackgroundKeeper); !ok {
			return nil, false
		}
		return g, true
	}
	k, ok = s.(BackgroundKeeper)
	return k, ok
}

// ErrNotBackgroundKeeper is returned by Guarded's BackgroundKeeper methods when the store it
// wraps is none.
var ErrNotBackgroundKeeper = errors.New("store: this store keeps no background responses")

// SaveBackground implements BackgroundKeeper for a Guarded whose store is one
// (BackgroundOf), under the timeout; ErrNotBackgroundKeeper otherwise.
func (g *Guarded) SaveBackground(ctx context.Context, owner, id string, rec []byte, events []BackgroundEvent, first int, ttl time.Duration) (bool, error) {
	k, ok := g.s.(BackgroundKeeper)
	if !ok {
		return false, ErrNotBackgroundKeeper
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	c, err := k.SaveBackground(ctx, owner, id, rec, events, first, ttl)
	if errors.Is(err, ErrBadTTL) {
		return false, err
	}
	return c, g.check("save background", id, err)
}

// LoadBackground implements BackgroundKeeper for a Guarded whose store is one
// (BackgroundOf), under the timeout; ErrNotBackgroundKeeper otherwise.
func (g *Guarded) LoadBackground(ctx context.Context, owner, id string, after, max int) ([]byte, []BackgroundEvent, error) {
	k, ok := g.s.(BackgroundKeeper)
	if !ok {
		return nil, nil, ErrNotBackgroundKeeper
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	rec, evs, err := k.LoadBackground(ctx, owner, id, after, max)
	return rec, evs, g.check("load background", id, err)
}

// CancelBackground implements BackgroundKeeper for a Guarded whose store is one
// (BackgroundOf), under the timeout; ErrNotBackgroundKeeper otherwise.
func (g *Guarded) CancelBackground(ctx context.Context, owner, id string, ttl time.Duration) error {
	k, ok := g.s.(BackgroundKeeper)
	if !ok {
		return ErrNotBackgroundKeeper
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	err := k.CancelBackground(ctx, owner, id, ttl)
	if errors.Is(err, ErrBadTTL) {
		return err
	}
	return g.check("cancel background", id, err)
}

// DeleteBackground implements BackgroundKeeper for a Guarded whose store is one
// (BackgroundOf), under the timeout; ErrNotBackgroundKeeper otherwise.
func (g *Guarded) DeleteBackground(ctx context.Context, owner, id string) error {
	k, ok := g.s.(BackgroundKeeper)
	if !ok {
		return ErrNotBackgroundKeeper
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return g.check("delete background", id, k.DeleteBackground(ctx, owner, id))
}

// backgroundKeys are the Redis keys of background response id of owner: <prefix>b:<owner>:<id>
// (the record, a string), <prefix>be:<owner>:<id> (the events, a stream whose entry ids are
// <sequence_number>-1) and <prefix>bc:<owner>:<id> (a cancel request, a string), the owner
// escaped as in responses' keys.
func (s *Redis) backgroundKeys(owner, id string) []string {
	tail := url.QueryEscape(owner) + ":" + id
	return []string{s.o.Prefix + "b:" + tail, s.o.Prefix + "be:" + tail, s.o.Prefix + "bc:" + tail}
}

// saveBackgroundScript: KEYS record, events, cancel; ARGV[1] the record, ARGV[2] the ttl in
// milliseconds, ARGV[3] the first sequence_number kept, then (seq, type, data) per event. An
// event at or below the stream's last id is skipped. It returns 1 when a cancel is requested.
var saveBackgroundScript = redis.NewScript(`#!lua
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local last = -1
local info = redis.pcall('XINFO', 'STREAM', KEYS[2])
if type(info) == 'table' and not info.err then
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = tonumber(string.match(info[i + 1], '^(%d+)')) end
  end
end
for i = 4, #ARGV, 3 do
  if tonumber(ARGV[i]) > last then
    redis.call('XADD', KEYS[2], ARGV[i] .. '-1', 't', ARGV[i + 1], 'd', ARGV[i + 2])
    last = tonumber(ARGV[i])
  end
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('XTRIM', KEYS[2], 'MINID', ARGV[3] .. '-0')
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return redis.call('EXISTS', KEYS[3])
`)

// SaveBackground implements BackgroundKeeper: one script.
func (s *Redis) SaveBackground(ctx context.Context, owner, id string, rec []byte, events []BackgroundEvent, first int, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, ErrBadTTL
	}
	args := make([]any, 0, 3+3*len(events))
	args = append(args, rec, max(ttl, time.Millisecond).Milliseconds(), max(first, 0))
	for _, ev := range events {
		args = append(args, ev.Seq, ev.Type, ev.Data)
	}
	n, err := saveBackgroundScript.Run(ctx, s.c, s.backgroundKeys(owner, id), args...).Int()
	if err != nil {
		return false, fmt.Errorf("store: redis save background: %w", err)
	}
	return n == 1, nil
}

// loadBackgroundScript: KEYS record, events; ARGV[1] the first stream id, ARGV[2] how many
// events at most (0: none). It returns false when there is no record, else {record} or
// {record, events}. It only reads (no-writes), so it runs while Redis is at its maxmemory, as
// GET does, where a MULTI transaction would be refused.
var loadBackgroundScript = redis.NewScript(`#!lua flags=no-writes
local rec = redis.call('GET', KEYS[1])
if not rec then return false end
local n = tonumber(ARGV[2])
if n > 0 then
  return {rec, redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', n)}
end
return {rec}
`)

// LoadBackground implements BackgroundKeeper: the record and the events after after, read
// together (loadBackgroundScript).
func (s *Redis) LoadBackground(ctx context.Context, owner, id string, after, max int) ([]byte, []BackgroundEvent, error) {
	keys := s.backgroundKeys(owner, id)
	v, err := loadBackgroundScript.Run(ctx, s.c, keys[:2], strconv.Itoa(after+1)+"-0", max).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: redis load background: %w", err)
	}
	rec, _ := v[0].(string)
	if len(v) < 2 {
		return []byte(rec), nil, nil
	}
	msgs, _ := v[1].([]any)
	evs := make([]BackgroundEvent, 0, len(msgs))
	for _, m := range msgs {
		ev, err := streamEvent(m)
		if err != nil {
			return nil, nil, fmt.Errorf("store: redis load background: %v of %s", err, id)
		}
		evs = append(evs, ev)
	}
	return []byte(rec), evs, nil
}

// streamEvent reads one XRANGE entry of a background response's events, as a script returns
// it: {id, {"t", type, "d", data}} with id "<sequence_number>-1".
func streamEvent(m any) (BackgroundEvent, error) {
	entry, _ := m.([]any)
	if len(entry) != 2 {
		return BackgroundEvent{}, fmt.Errorf("malformed event %v", m)
	}
	sid, _ := entry[0].(string)
	n, err := strconv.Atoi(strings.TrimSuffix(sid, "-1"))
	fields, _ := entry[1].([]any)
	var ev BackgroundEvent
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		val, _ := fields[i+1].(string)
		switch k {
		case "t":
			ev.Type = val
		case "d":
			ev.Data = []byte(val)
		}
	}
	if err != nil || ev.Type == "" {
		return BackgroundEvent{}, fmt.Errorf("malformed event %s", sid)
	}
	ev.Seq = n
	return ev, nil
}

// CancelBackground implements BackgroundKeeper: SET with the ttl.
func (s *Redis) CancelBackground(ctx context.Context, owner, id string, ttl time.Duration) error {
	if ttl <= 0 {
		return ErrBadTTL
	}
	if err := s.c.Set(ctx, s.backgroundKeys(owner, id)[2], "1", max(ttl, time.Millisecond)).Err(); err != nil {
		return fmt.Errorf("store: redis cancel background: %w", err)
	}
	return nil
}

// DeleteBackground implements BackgroundKeeper: DEL of its three keys.
func (s *Redis) DeleteBackground(ctx context.Context, owner, id string) error {
	if err := s.c.Del(ctx, s.backgroundKeys(owner, id)...).Err(); err != nil {
		return fmt.Errorf("store: redis delete background: %w", err)
	}
	return nil
}
