package server

import (
	"testing"
	"time"

	"github.com/tetherd/tether/internal/wstest"
	"github.com/tetherd/tether/session"
)

// TestMemoryPressureParksSuspendedRollouts: under a small -max-memory, a suspended live rollout
// is charged session.SuspendedLiveBytes. Without parking (-park-after 0) creates are refused
// server_overloaded once the suspended rollouts fill the budget; with parking (here a
// -park-after that never comes) the longest suspended rollouts are parked to make room and
// every create is admitted, the budget staying within its bound (give or take the charge of
// the last suspension, counted as it happens). The parked rollouts then
// resume hot: same Response id, sequence_number going on, cached_tokens.
func TestMemoryPressureParksSuspendedRollouts(t *testing.T) {
	const max, n = 512 << 10, 40
	if n*session.SuspendedLiveBytes <= max {
		t.Fatalf("%d suspended rollouts fit in %d bytes: the test proves nothing", n, max)
	}
	_, controlURL := testServer(t, Options{MaxMemory: max, Limits: session.Limits{MaxFrame: 64 << 10}})
	cc := dialAppend(t, controlURL)
	refused := -1
	for i := range n {
		cc.Send(map[string]any{"type": "response.create", "model": "sim", "input": "run the checks", "store": false,
			"tools": []any{shell}, "metadata": map[string]string{"sim.calls": "2"}})
		if f := cc.Next(); f.Type() == "error" {
			if f.Str("error", "code") != "server_overloaded" {
				t.Fatalf("control: %v", f)
			}
			refused = i
			break
		}
		cc.Until("response.done")
	}
	if refused < 0 {
		t.Fatalf("control: %d suspended live rollouts fit in %d bytes", n, max)
	}

	s, url := testServer(t, Options{MaxMemory: max, Limits: session.Limits{MaxFrame: 64 << 10, ParkAfter: time.Hour, SuspendTimeout: time.Minute}})
	c := dialAppend(t, url)
	type held struct {
		id, call string
		done     wstest.Frame
	}
	var rs []held
	for range n {
		id, call, done := suspendCalls(t, c, false)
		rs = append(rs, held{id, call, done})
		// A suspension's charge is counted when it happens, fitting or not (the goroutine
		// exists): the budget may pass its bound by that much until the next create parks.
		if used := s.Budget().InUse(); used > max+session.SuspendedLiveBytes+4<<10 {
			t.Fatalf("budget in use %d, over its bound %d by more than one suspension", used, max)
		}
	}
	m := s.Metrics()
	if m.PressureParks.Load() == 0 || m.Parked.Load() == 0 || m.Parks.Load() != m.PressureParks.Load() {
		t.Fatalf("parks %d (pressure %d), parked now %d: want every park a pressure one", m.Parks.Load(), m.PressureParks.Load(), m.Parked.Load())
	}
	t.Logf("control refused create %d; with parking %d created, %d parked under pressure, %d live, budget %d of %d",
		refused+1, n, m.PressureParks.Load(), m.Suspended.Load(), s.Budget().InUse(), max)
	for _, r := range rs[:5] { // the longest suspended: parked first
		appendTo(c, r.id, r.call)
		fs := c.Until("response.done")
		last := fs[len(fs)-1]
		if last.Str("response_id") != r.id || fs[0].Num("sequence_number") != r.done.Num("sequence_number")+1 {
			t.Fatalf("resumed %s: %v … %v", r.id, fs[0], last)
		}
		if cached, _ := last.Int("usage", "input_tokens_details", "cached_tokens"); cached == 0 {
			t.Fatalf("%s resumed cold: %v", r.id, last.Get("usage"))
		}
	}
	if m.Unparks.Load() < 5 {
		t.Fatalf("%d unparks: the oldest rollouts were not the parked ones", m.Unparks.Load())
	}
}
