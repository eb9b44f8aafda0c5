package session

import (
	"slices"
	"testing"
	"testing/synctest"

	"github.com/tetherd/tether/protocol"
)

// keptIDs is the ids of the connection's kept Responses, sorted.
func keptIDs(c *Conn) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	c.ended.Each(func(e endedEntry) bool {
		if e.k != nil {
			out = append(out, e.k.id)
		}
		return true
	})
	slices.Sort(out)
	return out
}

// heldBytes is the connection's running sum of held bytes.
func heldBytes(c *Conn) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// budgetHeld is what the Budget holds for c's rollouts and registry: its bytes in use less
// the reservation of c's queued frames.
func budgetHeld(b *Budget, c *Conn) int64 {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return b.InUse() - c.qreserved
}

// keptConn runs fn with a connection that has no rollouts, for the bounds of kept Responses.
func keptConn(t *testing.T, limits Limits, fn func(c *Conn, m *Metrics)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		m := &Metrics{}
		_, c, stop := serve(t, Options{Limits: limits, Metrics: m})
		defer stop()
		fn(c, m)
	})
}

// TestKeptCountBoundEvictsLeastRecentlyUsed: past CacheResponses the least recently kept or
// used Response goes first; Response refreshes one, PeekResponse does not.
func TestKeptCountBoundEvictsLeastRecentlyUsed(t *testing.T) {
	keptConn(t, Limits{CacheResponses: 3}, func(c *Conn, m *Metrics) {
		for _, id := range []string{"a", "b", "c"} {
			c.KeepResponse(id, "r_"+id, nil, 10, id)
		}
		if v, ok := c.Response("a"); !ok || v != "a" {
			t.Fatalf("Response(a) = %v, %v", v, ok)
		}
		c.PeekResponse("b")
		c.KeepResponse("d", "r_d", nil, 10, "d")
		if got, want := keptIDs(c), []string{"a", "c", "d"}; !slices.Equal(got, want) || m.Evictions.Load() != 1 {
			t.Fatalf("kept %v (%d evictions), want %v (b was least recently used)", got, m.Evictions.Load(), want)
		}
		if heldBytes(c) != 30 {
			t.Fatalf("held %d bytes, want 30", heldBytes(c))
		}
		if _, ok := c.Response("b"); ok {
			t.Fatal("Response of an evicted Response")
		}
	})
}

// TestKeptByteBound: past CacheBytes Responses go, least recently used first, until the
// connection's bytes fit; several may go for one.
func TestKeptByteBound(t *testing.T) {
	keptConn(t, Limits{CacheBytes: 100}, func(c *Conn, m *Metrics) {
		c.KeepResponse("a", "r", nil, 40, nil)
		c.KeepResponse("b", "r", nil, 40, nil)
		c.KeepResponse("c", "r", nil, 10, nil)
		c.KeepResponse("d", "r", nil, 60, nil) // 150 bytes: a and b go
		if got := keptIDs(c); !slices.Equal(got, []string{"c", "d"}) || heldBytes(c) != 70 || m.Evictions.Load() != 2 {
			t.Fatalf("kept %v, %d bytes, %d evictions; want [c d], 70, 2", got, heldBytes(c), m.Evictions.Load())
		}
		c.KeepResponse("e", "r", nil, 30, nil)
		if heldBytes(c) != 100 || m.Evictions.Load() != 2 {
			t.Fatalf("keeping up to the bound evicted: %v, %d bytes", keptIDs(c), heldBytes(c))
		}
	})
}

// TestKeptNewestNeverEvicted: the newest entry stays even when it alone breaks a bound; using
// an older one does not make it the newest.
func TestKeptNewestNeverEvicted(t *testing.T) {
	keptConn(t, Limits{CacheResponses: 1, CacheBytes: 50}, func(c *Conn, m *Metrics) {
		c.KeepResponse("a", "r", nil, 10, nil)
		c.KeepResponse("big", "r", nil, 500, nil)
		if got := keptIDs(c); !slices.Equal(got, []string{"big"}) {
			t.Fatalf("kept %v, want [big]", got)
		}
		c.KeepResponse("huge", "r", nil, 900, nil)
		if got := keptIDs(c); !slices.Equal(got, []string{"huge"}) || heldBytes(c) != 900 {
			t.Fatalf("kept %v (%d bytes), want [huge]", got, heldBytes(c))
		}
	})
	keptConn(t, Limits{CacheResponses: 1}, func(c *Conn, m *Metrics) {
		c.KeepResponse("x", "r", nil, 1, nil)
		c.Response("x")
		c.KeepResponse("y", "r", nil, 1, nil)
		if got := keptIDs(c); !slices.Equal(got, []string{"y"}) {
			t.Fatalf("kept %v, want [y]", got)
		}
	})
}

// TestOneRegistryAcrossShapes: append-shape rollouts and kept Responses are entries of one
// registry under one set of bounds: with CacheResponses 3 the least recently used ended entry
// goes, whichever its kind; a live rollout counts and stays; a kept Response that was the
// latest of its suspended rollout ends that rollout when it goes. The Budget holds exactly
// the registry's bytes throughout, and nothing once the connection has closed.
func TestOneRegistryAcrossShapes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, b := &Metrics{}, NewBudget(1<<30, 0)
		p, c, stop := serve(t, Options{Limits: Limits{CacheResponses: 3}, Metrics: m, Budget: b})
		exact := func(when string) {
			t.Helper()
			checkHeld(t, c)
			want := heldBytes(c) + SuspendedLiveBytes*m.Suspended.Load() // a live suspended rollout's charge
			if got := budgetHeld(b, c); got != want {
				t.Fatalf("%s: the Budget holds %d bytes for the registry, which holds %d", when, got, want)
			}
		}
		live, _ := start(t, p, "keep me", true) // counted; never evicted while live
		a, _ := start(t, p, "a", false)
		items := []protocol.Item{{Type: protocol.ItemMessage, ID: "msg_public", Role: protocol.RoleUser}}
		// A public-shape Response whose rollout is the suspended live one: its latest.
		c.SetLatest(live, "resp_s1")
		c.KeepResponse("resp_s1", live, items, 100, "s1")
		exact("three entries")
		if it, ok := c.Items([]string{"msg_public"})["msg_public"]; !ok || it.Role != protocol.RoleUser {
			t.Fatalf("Item of a kept Response's chain: %v %v", it, ok)
		}
		c.Chain(a) // a use: s1 is now the least recently used ended entry
		c.KeepResponse("resp_s2", "resp_gone", items, 200, "s2")
		// s1 went, not a; s1 was the live rollout's latest Response: nothing reaches that
		// rollout now, and it ends.
		if f := p.next(t); f["type"] != string(protocol.EventIncomplete) || reason(f) != protocol.ReasonCancelled {
			t.Fatalf("the orphaned rollout ended with %v", f)
		}
		synctest.Wait()
		if _, ok := c.PeekResponse("resp_s1"); ok || !kept(t, p, a) || m.Evictions.Load() != 1 {
			t.Fatalf("want s1 (least recently used) evicted, a kept: kept %v, %d evictions", keptIDs(c), m.Evictions.Load())
		}
		if got := liveKeys(c); len(got) != 0 {
			t.Fatalf("live rollouts %v after their latest Response was evicted", got)
		}
		exact("after an eviction across shapes")
		// a, s2 and the ended rollout live remain, least recently used first: the next
		// rollout that ends evicts a.
		bb, _ := start(t, p, "b", false)
		if kept(t, p, a) || !kept(t, p, live) || !kept(t, p, bb) || m.Evictions.Load() != 2 {
			t.Fatalf("want a evicted, live and b kept (%d evictions)", m.Evictions.Load())
		}
		if _, ok := c.PeekResponse("resp_s2"); !ok {
			t.Fatal("s2 evicted before an older entry")
		}
		exact("after the second eviction")
		if c.ForgetResponse("resp_s2") || m.Evictions.Load() != 2 {
			t.Fatal("forgetting a Response of no live rollout ended one, or counted as an eviction")
		}
		exact("after a forget")
		stop()
		c.Close()
		if n := b.InUse(); n != 0 {
			t.Fatalf("the Budget holds %d bytes after the connection closed", n)
		}
	})
}
