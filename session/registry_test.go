package session

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/tetherd/tether/protocol"
)

// start creates an append-shape rollout and reads it to its first stop (in a synctest
// bubble); with a tool it
// suspends (live), without one it completes (ended). It returns the rollout's id and, when
// suspended, its pending call_id.
func start(t *testing.T, p *pipe, input string, tool bool) (id, call string) {
	t.Helper()
	m := map[string]any{"type": "response.create", "model": "sim", "input": input}
	stop := protocol.EventCompleted
	if tool {
		m["tools"] = []any{shellTool}
		stop = protocol.EventDone
	}
	p.send(t, m)
	fs := p.until(t, stop)
	synctest.Wait() // the registry is updated (and evicted) after the stop event is sent
	if tool {
		call = fs[len(fs)-1]["pending_call_ids"].([]any)[0].(string)
	}
	return fs[0]["response"].(map[string]any)["id"].(string), call
}

// kept reports whether the registry still knows the ended rollout id: a response.cancel of it
// is answered response_already_completed (409) while kept, response_not_found (404) once
// evicted.
func kept(t *testing.T, p *pipe, id string) bool {
	t.Helper()
	p.send(t, map[string]any{"type": "response.cancel", "response_id": id})
	f := p.next(t)
	code, _ := f["error"].(map[string]any)["code"].(string)
	switch code {
	case protocol.CodeAlreadyCompleted:
		return true
	case protocol.CodeResponseNotFound:
		return false
	}
	t.Fatalf("append to ended rollout %s: %v", id, f)
	return false
}

// liveKeys is the keys of the connection's live rollouts, in start order.
func liveKeys(c *Conn) []string {
	var keys []string
	for _, r := range c.Snapshot().Rollouts {
		keys = append(keys, r.Key)
	}
	return keys
}

// checkHeld fails t unless the connection's running sum of held bytes is the sum of its
// registry's.
func checkHeld(t *testing.T, c *Conn) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	for _, h := range c.reg {
		sum += h.bytes
	}
	c.ended.Each(func(e endedEntry) bool {
		if e.k != nil {
			sum += e.k.bytes
		}
		return true
	})
	if c.held != sum {
		t.Fatalf("held %d bytes, the registry holds %d", c.held, sum)
	}
}

// TestRegistryEvictsEndedRolloutsLeastRecentlyUsed: past CacheResponses the least recently
// used ended rollout is evicted (a continuation lookup counts as a use); the suspended rollout,
// older than all of them, stays.
func TestRegistryEvictsEndedRolloutsLeastRecentlyUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &Metrics{}
		p, c, stop := serve(t, Options{Limits: Limits{CacheResponses: 3}, Metrics: m})
		defer stop()
		live, _ := start(t, p, "keep me", true)
		b, _ := start(t, p, "b", false)
		cc, _ := start(t, p, "c", false)
		if s := c.Snapshot(); s.Ended != 2 || m.Evictions.Load() != 0 {
			t.Fatalf("under the bound: %d ended, %d evictions", s.Ended, m.Evictions.Load())
		}
		if _, ended, ok := c.Chain(b); !ok || !ended { // b is now more recently used than c
			t.Fatalf("Chain(%s): ended %v ok %v", b, ended, ok)
		}
		d, _ := start(t, p, "d", false)
		if m.Evictions.Load() != 1 {
			t.Fatalf("%d evictions, want 1", m.Evictions.Load())
		}
		if !kept(t, p, b) || kept(t, p, cc) || !kept(t, p, d) {
			t.Fatal("want c (least recently used) evicted, b and d kept")
		}
		checkHeld(t, c)
		if got := liveKeys(c); !slices.Equal(got, []string{live}) {
			t.Fatalf("live rollouts %v, want [%s]", got, live)
		}
	})
}

// TestRegistryNeverEvictsLiveRollouts: live rollouts stay past both bounds; only ended
// rollouts make room, but never the newest entry (the one that just ended).
func TestRegistryNeverEvictsLiveRollouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"count", Options{Limits: Limits{CacheResponses: 1}}},
		{"bytes", Options{Limits: Limits{CacheBytes: 1, MaxRolloutBytes: 1 << 20}}}, // live rollouts are bounded by MaxRolloutBytes
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tc.opts.Metrics = &Metrics{}
				p, c, stop := serve(t, tc.opts)
				defer stop()
				a, callA := start(t, p, "first", true)
				b, callB := start(t, p, "second", true)
				if got := liveKeys(c); !slices.Equal(got, []string{a, b}) {
					t.Fatalf("live rollouts %v, want [%s %s] past the bound", got, a, b)
				}
				// The newest entry is never evicted: the rollout that just ended stays past the
				// bound until the next one ends.
				e, _ := start(t, p, "ends", false)
				if !kept(t, p, e) || c.Snapshot().Ended != 1 || tc.opts.Metrics.Evictions.Load() != 0 {
					t.Fatalf("the newest entry was evicted (%d ended, %d evictions)",
						c.Snapshot().Ended, tc.opts.Metrics.Evictions.Load())
				}
				f, _ := start(t, p, "ends too", false)
				if kept(t, p, e) || !kept(t, p, f) || c.Snapshot().Ended != 1 || tc.opts.Metrics.Evictions.Load() != 1 {
					t.Fatalf("past the bound the older ended rollout was kept (%d ended, %d evictions)",
						c.Snapshot().Ended, tc.opts.Metrics.Evictions.Load())
				}
				if got := liveKeys(c); !slices.Equal(got, []string{a, b}) {
					t.Fatalf("live rollouts %v after an eviction, want [%s %s]", got, a, b)
				}
				// The live rollouts still resume, to their end.
				for id, call := range map[string]string{a: callA, b: callB} {
					p.send(t, map[string]any{"type": "response.append", "response_id": id, "input": []any{
						map[string]any{"type": "function_call_output", "call_id": call, "output": "ok"}}})
					fs := p.until(t, protocol.EventCompleted)
					if got := fs[len(fs)-1]["response"].(map[string]any)["id"]; got != id {
						t.Fatalf("append to %s completed %v", id, got)
					}
				}
				synctest.Wait() // the registry is updated after the terminal event is sent
				checkHeld(t, c)
			})
		})
	}
}
