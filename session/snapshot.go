package session

import (
	"cmp"
	"slices"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// RolloutSnapshot is a read-only view of one live rollout of a connection, for operators
// (tether serve -ui's live view). Times are the server's clock.
type RolloutSnapshot struct {
	// Key is the rollout's registry key: its Response id in the append shape, the id of the
	// chain's first Response in the public shape.
	Key string
	// State is "queued" (waiting for the sampling slot, also after an accepted append),
	// "sampling", "suspended" or "parked" (suspended, holding no goroutine: Limits.ParkAfter).
	State string
	// Turns counts the turns begun: 1 for the create, then one per accepted continuation.
	Turns int
	// Usage is cumulative over the rollout as of its last suspension (zero before the first).
	Usage protocol.Usage
	// ContextTokens is the size in tokens of the rollout's context at its last sampling step
	// (that step's input plus output tokens).
	ContextTokens int
	// Started is when the rollout was accepted; TurnStarted when its current or last turn was.
	Started, TurnStarted time.Time
}

// ConnSnapshot is a read-only view of a connection core and its live rollouts.
type ConnSnapshot struct {
	// ID is the connection's id ("conn_…").
	ID string
	// Opened is when NewConn returned.
	Opened time.Time
	// Draining reports a drain in progress (shutdown or the connection age limit).
	Draining bool
	// Rollouts are the live rollouts (queued, sampling, suspended or parked), in the order they started. Ended
	// rollouts kept for previous_response_id are counted in Ended only.
	Rollouts []RolloutSnapshot
	// Ended counts the ended rollouts the registry still keeps.
	Ended int
}

// Snapshot returns the connection's state now. It takes the connection's lock briefly and
// copies; it never blocks on a rollout.
func (c *Conn) Snapshot() ConnSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := ConnSnapshot{ID: c.id, Opened: c.opened, Draining: c.draining}
	live := make([]*rollout, 0, len(c.reg))
	for _, h := range c.reg {
		if h.final {
			s.Ended++
			continue
		}
		live = append(live, h)
	}
	slices.SortFunc(live, func(a, b *rollout) int { return cmp.Compare(a.seq, b.seq) })
	for _, h := range live {
		state := sampler.Parked
		if h.r != nil {
			state = h.r.State()
		}
		if state == sampler.Resuming {
			state = sampler.Queued
		}
		s.Rollouts = append(s.Rollouts, RolloutSnapshot{Key: h.key, State: state.String(), Turns: h.turns,
			Usage: h.usage, ContextTokens: h.context, Started: h.started, TurnStarted: h.turnStart})
	}
	return s
}

// record keeps a rollout's usage as of a suspension or its end. Guarded by Conn.mu.
func (h *rollout) record(total, step protocol.Usage) {
	h.usage = total
	if n := step.InputTokens + step.OutputTokens; n > 0 {
		h.context = n
	}
}
