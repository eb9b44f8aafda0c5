package chatapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session"
)

// Slots is the llama.cpp-compatible slot emulation of Handler (see the package doc): N slots,
// each keeping one ModelSession open with the items it has seen. Safe for concurrent use.
type Slots struct {
	// Immutable
	model sampler.Model
	// maxBytes bounds the items one slot keeps (session.ItemsBytes); 0 means no bound.
	maxBytes int64
	// idle frees a slot's session after this long unused; 0 means never.
	idle time.Duration
	// share is the fraction of the slots one key may hold while another key holds or waits
	// for one; 0 means no share.
	share float64
	// budget counts the bytes of the items the slots keep; nil counts nothing.
	budget *session.Budget
	log    *slog.Logger

	mu       sync.Mutex // guards everything below and each slot's fields
	slots    []*slot
	released chan struct{} // closed (and replaced) whenever a slot is released or a waiter leaves
	closed   bool
	clock    int64          // use counter, for least-recently-used
	byKey    map[string]int // busy slots per key (keys holding one)
	waiting  map[string]int // requests waiting for a slot, per key
}

// slot is one slot: an open session (nil when free) and what it holds.
type slot struct {
	p        *Slots // immutable
	id       int
	busy     bool
	key      string // the key of the request holding it, while busy
	ms       sampler.ModelSession
	settings *sampler.Settings // the session's settings (RolloutInfo.Settings)
	fed      []protocol.Item   // items the session has taken
	gen      []protocol.Item   // items it generated in its last step (not yet fed back)
	steps    int               // sampling steps run on ms
	used     int64             // Slots.clock at the last release
	n        int               // items held at the last release (for Info; guarded by mu)
	nBytes   int64             // their bytes (for Info; guarded by mu)
	timer    *time.Timer       // frees the session after the idle timeout
	bytes    int64             // reserved in Slots.budget for fed and gen
}

// SlotOptions configures Slots. The zero value works: one slot, no bounds, no share.
type SlotOptions struct {
	// N is the number of slots; at least 1 (0 means 1).
	N int
	// MaxBytes bounds the items one slot keeps (session.ItemsBytes: items and their parts, in
	// bytes); a larger context is answered but not kept. 0 means no bound.
	MaxBytes int64
	// Idle frees a slot's session after this long unused. 0 means never.
	Idle time.Duration
	// KeyShare gives each key (session.QuotaKey) a share of the slots: while a request of
	// another key holds a slot or waits for one, a key holding ⌈KeyShare·N⌉ slots or more
	// waits for one of its own to be released instead of taking a free one, so that one key
	// cannot hold every slot while another waits longer than one of its requests. ≤ 0 or ≥ 1
	// means no share.
	KeyShare float64
	// Budget is the server's memory budget, which counts the bytes of the items each slot
	// keeps (as it counts a rollout's), from the end of a step until the slot is freed; a
	// context that does not fit in it is answered but not kept. Nil counts nothing.
	Budget *session.Budget
	// Logger receives the value and stack of a backend that panics when a slot's session is
	// closed. Nil means slog.Default().
	Logger *slog.Logger
}

// NewSlots returns the slots of opts over model.
func NewSlots(model sampler.Model, opts SlotOptions) *Slots {
	share := opts.KeyShare
	if share <= 0 || share >= 1 {
		share = 0
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	p := &Slots{model: model, maxBytes: opts.MaxBytes, idle: max(opts.Idle, 0), share: share, budget: opts.Budget,
		log: opts.Logger, released: make(chan struct{}), byKey: map[string]int{}, waiting: map[string]int{}}
	for i := range max(opts.N, 1) {
		p.slots = append(p.slots, &slot{p: p, id: i})
	}
	return p
}

// Waiting returns the number of requests waiting for a slot.
func (p *Slots) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.waiting {
		n += c
	}
	return n
}

// Len returns the number of slots.
func (p *Slots) Len() int { return len(p.slots) }

// errClosed is returned by acquire after Close.
var errClosed = &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer,
	Code: protocol.CodeShuttingDown, Message: "The server is shutting down."}

// acquire waits for slot id (≥ 0) or for the best idle slot (id < 0) and marks it busy for
// key (session.QuotaKey; "" has no share), within key's share (SlotOptions.KeyShare).
func (p *Slots) acquire(ctx context.Context, key string, id int, items []protocol.Item) (*slot, error) {
	if id >= len(p.slots) {
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "id_slot", "id_slot %d: this server has slots 0 to %d.", id, len(p.slots)-1)
	}
	waiting := false
	defer func() {
		if waiting { // left without a slot: a key held back by this wait may go on
			p.mu.Lock()
			p.unwait(key)
			p.wake()
			p.mu.Unlock()
		}
	}()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errClosed
		}
		var s *slot
		if p.mayTake(key) {
			s = p.pick(id, items)
		}
		if s != nil {
			s.busy, s.key = true, key
			p.byKey[key]++
			if waiting {
				p.unwait(key)
				waiting = false
			}
			if s.timer != nil {
				s.timer.Stop()
				s.timer = nil
			}
			p.mu.Unlock()
			return s, nil
		}
		if !waiting {
			p.waiting[key]++
			waiting = true
		}
		ch := p.released
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// mayTake reports whether key may take one more slot: it holds fewer than its share, or no
// request of another key holds or waits for a slot. Called with mu held.
func (p *Slots) mayTake(key string) bool {
	if p.share == 0 || key == "" || int64(p.byKey[key]) < session.ShareOf(p.share, int64(len(p.slots))) {
		return true
	}
	for _, m := range []map[string]int{p.byKey, p.waiting} {
		for k := range m {
			if k != key {
				return false
			}
		}
	}
	return true
}

// unwait counts one fewer waiter of key. Called with mu held.
func (p *Slots) unwait(key string) {
	if p.waiting[key]--; p.waiting[key] <= 0 {
		delete(p.waiting, key)
	}
}

// wake wakes every waiter to look again. Called with mu held.
func (p *Slots) wake() {
	close(p.released)
	p.released = make(chan struct{})
}

// pick returns slot id if idle, or for id < 0 the idle slot with the longest matching prefix,
// else the least recently used idle slot; nil when none is idle. Called with mu held.
func (p *Slots) pick(id int, items []protocol.Item) *slot {
	if id >= 0 {
		if s := p.slots[id]; !s.busy {
			return s
		}
		return nil
	}
	var best, lru *slot
	bestN := 0
	for _, s := range p.slots {
		if s.busy {
			continue
		}
		if lru == nil || s.used < lru.used {
			lru = s
		}
		if s.ms == nil {
			continue
		}
		if n := prefixLen(s.held(), items); n > bestN {
			best, bestN = s, n
		}
	}
	if best == nil {
		return lru
	}
	return best
}

// release marks s idle and arms its idle timer.
func (p *Slots) release(s *slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.busy = false
	if p.byKey[s.key]--; p.byKey[s.key] <= 0 {
		delete(p.byKey, s.key)
	}
	s.key = ""
	p.clock++
	s.used = p.clock
	if p.closed {
		s.free()
	}
	s.n, s.nBytes = len(s.fed)+len(s.gen), s.bytes
	if !p.closed && p.idle > 0 && s.ms != nil {
		used := s.used
		s.timer = time.AfterFunc(p.idle, func() { p.expire(s, used) })
	}
	p.wake()
}

// expire frees s's session when it has not been used since used.
func (p *Slots) expire(s *slot, used int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !s.busy && s.used == used {
		s.free()
		s.n, s.nBytes = 0, 0
	}
}

// Close frees every idle slot's session and makes later requests fail; a busy slot is freed
// when its request releases it.
func (p *Slots) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.slots {
		if s.timer != nil {
			s.timer.Stop()
			s.timer = nil
		}
		if !s.busy {
			s.free()
			s.n, s.nBytes = 0, 0
		}
	}
	close(p.released)
	p.released = make(chan struct{})
}

// held returns the items s's session holds, its generated ones included.
func (s *slot) held() []protocol.Item {
	return append(s.fed[:len(s.fed):len(s.fed)], s.gen...)
}

// free closes s's session and forgets its items, giving their bytes back to the budget. A
// panicking Close is contained and logged with its stack.
func (s *slot) free() {
	ms := s.ms
	s.ms, s.settings, s.fed, s.gen, s.steps = nil, nil, nil, nil, 0
	s.p.budget.Release(s.bytes)
	s.bytes = 0
	if ms == nil {
		return
	}
	if err := guard(func() error { ms.Close(); return nil }); err != nil {
		logPanic(s.p.log, "closing a chat slot's session", err)
	}
}

// SlotInfo describes one slot for GET /slots.
type SlotInfo struct {
	ID           int  `json:"id"`
	IsProcessing bool `json:"is_processing"`
	// Items is the number of items the slot's session held when it was last released (0: no
	// session).
	Items int `json:"n_items"`
	// Bytes is the size of those items (session.ItemsBytes), counted in the server's memory
	// budget while the slot keeps them.
	Bytes int64 `json:"n_bytes"`
}

// Info returns the slots' state.
func (p *Slots) Info() []SlotInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]SlotInfo, len(p.slots))
	for i, s := range p.slots {
		out[i] = SlotInfo{ID: s.id, IsProcessing: s.busy, Items: s.n, Bytes: s.nBytes}
	}
	return out
}

// prefixLen returns the number of leading items held and items share (by content).
func prefixLen(held, items []protocol.Item) int {
	n := 0
	for n < len(held) && n < len(items) && sameItem(&held[n], &items[n]) {
		n++
	}
	return n
}

// sameItem compares two items by content: type, role, name, arguments, output and every
// content part (text, and images by their JSON); never ids, call_ids or statuses.
func sameItem(a, b *protocol.Item) bool {
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case protocol.ItemMessage:
		return a.Role == b.Role && sameParts(a.Content, b.Content)
	case protocol.ItemFunctionCall:
		return a.Name == b.Name && a.Arguments == b.Arguments
	case protocol.ItemFunctionCallOutput:
		return a.Output == b.Output && sameParts(a.OutputParts, b.OutputParts)
	}
	return string(a.Raw) == string(b.Raw)
}

// sameParts reports whether two content part lists are equal: types, texts, and the JSON of
// images.
func sameParts(a, b []protocol.ContentPart) bool {
	return slices.EqualFunc(a, b, func(p, q protocol.ContentPart) bool {
		return p.Type == q.Type && p.Text == q.Text && (p.Type != chatwire.PartInputImage || string(p.Raw) == string(q.Raw))
	})
}

// prepare makes s ready to sample items with settings: it returns the step to run, reusing
// the open session when its items are a prefix of items and its settings are equal (and
// reuse is allowed), else opening a new session. The caller holds s (busy).
func (s *slot) prepare(ctx context.Context, model sampler.Model, settings *sampler.Settings, items []protocol.Item, reuse bool) (*sampler.Step, error) {
	held := s.held()
	if s.ms != nil && reuse && reflect.DeepEqual(s.settings, settings) && prefixLen(held, items) == len(held) {
		step := &sampler.Step{Index: s.steps, Output: items[len(s.fed):len(held):len(held)],
			Input: items[len(held):], Context: items, Calls: countCalls(items[:len(held)])}
		return step, nil
	}
	s.free()
	ms, err := model.Open(ctx, sampler.RolloutInfo{ID: fmt.Sprintf("slot_%d", s.id), ConnID: fmt.Sprintf("slot_%d", s.id), Settings: settings})
	if err != nil {
		return nil, err
	}
	s.ms, s.settings = ms, settings
	return &sampler.Step{Input: items, Context: items}, nil
}

// done records a step's outcome: the items it generated are held when the step succeeded, the
// slot stays within maxBytes and the budget takes their bytes; otherwise the session is freed.
func (s *slot) done(items, generated []protocol.Item, ok bool) {
	s.steps++
	s.fed = items
	s.gen = generated
	n := session.ItemsBytes(items) + session.ItemsBytes(generated)
	if !ok || (s.p.maxBytes > 0 && n > s.p.maxBytes) || !s.keep(n) {
		s.free()
	}
}

// keep counts n bytes held by s in the budget instead of s.bytes; false when the growth does
// not fit (s.bytes unchanged).
func (s *slot) keep(n int64) bool {
	switch {
	case n > s.bytes:
		if !s.p.budget.TryReserve(n - s.bytes) {
			return false
		}
	case n < s.bytes:
		s.p.budget.Release(s.bytes - n)
	}
	s.bytes = n
	return true
}

func countCalls(items []protocol.Item) int {
	n := 0
	for i := range items {
		if items[i].Type == protocol.ItemFunctionCall {
			n++
		}
	}
	return n
}
