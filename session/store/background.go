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
	// SaveBackgrounds does the saves of many background responses in one round trip, so that
	// an instance keeps all of its running responses' records at the cost of one call per
	// interval, whatever their number. Each BackgroundSave is one SaveBackground, or (Rec nil)
	// only the question whether a cancel of its response was requested, which writes
	// nothing; cancels[i] answers saves[i]. Errors: ErrBadTTL when a save has no ttl (nothing
	// is written), else a store failure: then each save may or may not have been done, and
	// each is safe to repeat, as a failed SaveBackground.
	SaveBackgrounds(ctx context.Context, saves []BackgroundSave) (cancels []bool, err error)
	// CancelBackground leaves a cancel request for background response id of owner, kept
	// for ttl (> 0); SaveBackground reports it to the running instance.
	CancelBackground(ctx context.Context, owner, id string, ttl time.Duration) error
	// DeleteBackground removes the record, events and cancel request of id of owner;
	// ErrNotFound when there was no record (what else there was is removed all the same).
	DeleteBackground(ctx context.Context, owner, id string) error
}

// BackgroundSave is one save of SaveBackgrounds: the arguments of a SaveBackground of
// background response ID of Owner, or, with Rec nil, only a look for its cancel request.
type BackgroundSave struct {
	Owner, ID string
	// Rec is the record to write; nil writes nothing (Events, First and TTL are then unused).
	Rec    []byte
	Events []BackgroundEvent
	First  int
	TTL    time.Duration
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

// SaveBackgrounds implements BackgroundKeeper for a Guarded whose store is one
// (BackgroundOf), under the timeout (one for the whole batch); ErrNotBackgroundKeeper
// otherwise. A failure is counted once.
func (g *Guarded) SaveBackgrounds(ctx context.Context, saves []BackgroundSave) ([]bool, error) {
	k, ok := g.s.(BackgroundKeeper)
	if !ok {
		return nil, ErrNotBackgroundKeeper
	}
	if len(saves) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	c, err := k.SaveBackgrounds(ctx, saves)
	if errors.Is(err, ErrBadTTL) {
		return nil, err
	}
	return c, g.check("save backgrounds", saves[0].ID, err)
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

// saveBackgroundsScript does SaveBackgrounds' saves: KEYS are, per save, the record, the
// events and the cancel request of its response; ARGV, per save in the same order, the number
// of its events (-1: no write, only the look for a cancel request), then, for a write, the
// record, the ttl in milliseconds, the first sequence_number kept and (seq, type, data) per
// event. An event at or below the stream's last id is skipped. It returns, per save, 1 when a
// cancel is requested, else 0.
var saveBackgroundsScript = redis.NewScript(`#!lua
local out = {}
local a = 1
for i = 1, #KEYS, 3 do
  local n = tonumber(ARGV[a])
  if n >= 0 then
    local rec, ttl, first = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
    redis.call('SET', KEYS[i], rec, 'PX', ttl)
    if n > 0 then
      local last = -1
      local info = redis.pcall('XINFO', 'STREAM', KEYS[i + 1])
      if type(info) == 'table' and not info.err then
        for j = 1, #info, 2 do
          if info[j] == 'last-generated-id' then last = tonumber(string.match(info[j + 1], '^(%d+)')) end
        end
      end
      for j = a + 4, a + 1 + 3 * n, 3 do
        if tonumber(ARGV[j]) > last then
          redis.call('XADD', KEYS[i + 1], ARGV[j] .. '-1', 't', ARGV[j + 1], 'd', ARGV[j + 2])
          last = tonumber(ARGV[j])
        end
      end
    end
    if redis.call('EXISTS', KEYS[i + 1]) == 1 then
      redis.call('XTRIM', KEYS[i + 1], 'MINID', first .. '-0')
      redis.call('PEXPIRE', KEYS[i + 1], ttl)
    end
    a = a + 4 + 3 * n
  else
    a = a + 1
  end
  out[#out + 1] = redis.call('EXISTS', KEYS[i + 2])
end
return out
`)

// Bounds of one saveBackgroundsScript call: a batch of more writes (saves with a record), of
// more saves in all (a save without a record costs Redis one EXISTS), or of more bytes of
// records and events, is split into several calls, sent together (one round trip), so that no
// one script holds Redis for long.
const (
	saveBatchWrites = 128
	saveBatchSaves  = 4096
	saveBatchBytes  = 1 << 20
)

// SaveBackground implements BackgroundKeeper: one script (SaveBackgrounds of one save).
func (s *Redis) SaveBackground(ctx context.Context, owner, id string, rec []byte, events []BackgroundEvent, first int, ttl time.Duration) (bool, error) {
	if rec == nil {
		rec = []byte{}
	}
	c, err := s.SaveBackgrounds(ctx, []BackgroundSave{{Owner: owner, ID: id, Rec: rec, Events: events, First: first, TTL: ttl}})
	if err != nil {
		return false, err
	}
	return c[0], nil
}

// SaveBackgrounds implements BackgroundKeeper: the saves go in scripts of at most
// saveBatchWrites writes, saveBatchSaves saves and about saveBatchBytes bytes each, all sent
// in one pipeline (one
// round trip); when Redis does not have the script yet (NOSCRIPT) the pipeline is sent once
// more with the script's body (its saves are safe to repeat), which Redis then keeps.
func (s *Redis) SaveBackgrounds(ctx context.Context, saves []BackgroundSave) ([]bool, error) {
	for i := range saves {
		if saves[i].Rec != nil && saves[i].TTL <= 0 {
			return nil, ErrBadTTL
		}
	}
	batches := s.saveBatches(saves)
	cmds, err := s.runSaves(ctx, batches, false)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = s.runSaves(ctx, batches, true) // EVAL caches the script for the next calls
	}
	if err != nil {
		return nil, fmt.Errorf("store: redis save background: %w", err)
	}
	cancels := make([]bool, 0, len(saves))
	for _, cmd := range cmds {
		v, err := cmd.Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("store: redis save background: %w", err)
		}
		for _, n := range v {
			cancels = append(cancels, n == 1)
		}
	}
	if len(cancels) != len(saves) {
		return nil, fmt.Errorf("store: redis save background: %d answers for %d saves", len(cancels), len(saves))
	}
	return cancels, nil
}

// saveBatch is the keys and arguments of one saveBackgroundsScript call.
type saveBatch struct {
	keys   []string
	args   []any
	writes int // saves with a record
	bytes  int // of records and events
}

// full reports whether b has no room for one more save of n bytes (write: with a record).
func (b *saveBatch) full(write bool, n int) bool {
	if len(b.keys) == 0 {
		return false
	}
	return len(b.keys)/3 >= saveBatchSaves || (write && b.writes >= saveBatchWrites) || b.bytes+n > saveBatchBytes
}

// saveBatches splits saves into the calls of saveBackgroundsScript, in order.
func (s *Redis) saveBatches(saves []BackgroundSave) []saveBatch {
	var out []saveBatch
	var cur saveBatch
	for i := range saves {
		sv := &saves[i]
		n := len(sv.Rec)
		for _, ev := range sv.Events {
			n += len(ev.Data)
		}
		if cur.full(sv.Rec != nil, n) {
			out = append(out, cur)
			cur = saveBatch{}
		}
		cur.bytes += n
		cur.keys = append(cur.keys, s.backgroundKeys(sv.Owner, sv.ID)...)
		if sv.Rec == nil {
			cur.args = append(cur.args, -1)
			continue
		}
		cur.writes++
		cur.args = append(cur.args, len(sv.Events), sv.Rec, max(sv.TTL, time.Millisecond).Milliseconds(), max(sv.First, 0))
		for _, ev := range sv.Events {
			cur.args = append(cur.args, ev.Seq, ev.Type, ev.Data)
		}
	}
	if len(cur.keys) > 0 {
		out = append(out, cur)
	}
	return out
}

// runSaves sends one saveBackgroundsScript call per batch in one pipeline, by EVALSHA, or by
// EVAL when full (the script body with each call). It returns the calls' commands and the
// first error.
func (s *Redis) runSaves(ctx context.Context, batches []saveBatch, full bool) ([]*redis.Cmd, error) {
	pipe := s.c.Pipeline()
	cmds := make([]*redis.Cmd, len(batches))
	for i, b := range batches {
		if full {
			cmds[i] = saveBackgroundsScript.Eval(ctx, pipe, b.keys, b.args...)
		} else {
			cmds[i] = saveBackgroundsScript.EvalSha(ctx, pipe, b.keys, b.args...)
		}
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
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

// DeleteBackground implements BackgroundKeeper: DEL of its three keys, in one round trip,
// the record's alone first to learn whether there was one.
func (s *Redis) DeleteBackground(ctx context.Context, owner, id string) error {
	keys := s.backgroundKeys(owner, id)
	var rec *redis.IntCmd
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		rec = p.Del(ctx, keys[0])
		p.Del(ctx, keys[1:]...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: redis delete background: %w", err)
	}
	if rec.Val() == 0 {
		return ErrNotFound
	}
	return nil
}
