package chat

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// engine is one upstream replica: its URLs, the slots Tether owns on it, its health and its
// counters. Rollouts are placed on a replica when they open and stay there while it is healthy.
type engine struct {
	m     *Model
	url   string    // BaseURL + "/chat/completions"
	api   string    // BaseURL as configured, without a trailing "/": the replica's name in a parked state
	base  string    // the server root (BaseURL without a trailing /v1), for /slots and /health
	slots *slotPool // nil when Options.Slots is 0

	steps    atomic.Int64 // sampling steps in flight
	rollouts atomic.Int64 // open rollouts placed here

	// slotsChecked: the replica's slot count was checked against Options.Slots (Probe, or
	// checkSlots before a step); cleared when it fails, since it may come back restarted.
	slotsChecked atomic.Bool

	mu        sync.Mutex // guards the health fields below
	down      bool
	retryAt   time.Time     // while down: when the replica may be tried again
	backoff   time.Duration // the next wait after a failure
	lastError string

	total, failures, cold atomic.Int64 // steps run, steps failed by the replica, steps moved here cold
	input, cached         atomic.Int64 // prompt tokens and cached prompt tokens the replica reported
}

// Health backoff after a replica fails: from backoffMin, doubling to backoffMax.
const (
	backoffMin = 500 * time.Millisecond
	backoffMax = 30 * time.Second
)

func newEngine(m *Model, baseURL string) *engine {
	baseURL = strings.TrimRight(baseURL, "/")
	e := &engine{m: m, url: baseURL + "/chat/completions", api: baseURL, base: strings.TrimSuffix(baseURL, "/v1")}
	if m.opts.Slots > 0 {
		e.slots = newSlotPool(e, m.opts.Slots, m.opts.SlotDir, m.opts.SlotSaveBytes)
	}
	return e
}

// load is the placement cost of a replica: steps in flight plus rollouts holding slots.
func (e *engine) load() int64 {
	return e.steps.Load() + e.rollouts.Load()
}

// usable reports whether the replica may take a step now: it is up, or its backoff is over
// (the step is then the probe).
func (e *engine) usable(now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.down || !now.Before(e.retryAt)
}

// failed records a failure of the replica itself (it could not be reached, or answered 502,
// 503 or 504): it is taken out of placement for its backoff.
func (e *engine) failed(err error) {
	e.failures.Add(1)
	e.slotsChecked.Store(false)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.down {
		e.backoff = backoffMin
	} else {
		e.backoff = min(2*e.backoff, backoffMax)
	}
	e.down, e.retryAt, e.lastError = true, time.Now().Add(e.backoff), err.Error()
}

// broke is called when a step's stream to the replica broke off (EOF, reset) or ended without
// a finish_reason after the engine answered: the engine may have crashed or restarted. Its
// slot count is checked again before its next step (a restarted llama-server may have fewer
// slots), and its health is asked at once: a replica that does not answer is out of placement
// for its backoff, so that no rollout is placed on it, or steps there, until it answers a later
// probe. A replica that answers stays in placement (the break was the connection's, or the
// engine is already back).
func (e *engine) broke(cause error) {
	e.slotsChecked.Store(false)
	if e.probe(context.Background()) {
		return
	}
	e.failed(fmt.Errorf("the health probe after the stream broke off (%v) failed", cause))
}

// ok records a step the replica served: it is healthy again.
func (e *engine) ok() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down = false
}

// isDown reports whether the replica is out of placement now.
func (e *engine) isDown() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.down
}

// place chooses the replica for a new rollout, or for one whose replica failed (avoid): the
// least loaded usable replica, else the one whose backoff ends first.
func (m *Model) place(avoid *engine) *engine {
	now := time.Now()
	var best, soonest *engine
	var soonestAt time.Time
	for _, e := range m.engines {
		if e == avoid && len(m.engines) > 1 {
			continue
		}
		if e.usable(now) {
			if best == nil || e.load() < best.load() {
				best = e
			}
			continue
		}
		if at := e.nextTry(); soonest == nil || at.Before(soonestAt) {
			soonest, soonestAt = e, at
		}
	}
	switch {
	case best != nil:
		return best
	case soonest != nil:
		return soonest
	}
	return m.engines[0]
}

// nextTry returns when a down replica may be tried again.
func (e *engine) nextTry() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.retryAt
}

// probe asks the replica's health once: GET /health (llama.cpp, vLLM), else GET /healthz
// (another Tether), else GET / (Ollama answers only there); used at start and before a replica
// whose backoff is over takes a rollout again.
func (e *engine) probe(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, path := range []string{"/health", "/healthz", "/"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
		if err != nil {
			return false
		}
		e.m.authorize(req)
		resp, err := e.m.client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
	}
	return false
}
