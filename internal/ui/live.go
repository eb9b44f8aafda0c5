package ui

import (
	"net/http"
	"time"

	"github.com/tetherd/tether/internal/server"
)

// Live is the body of GET /ui/api/live: every connection the server serves and its live
// rollouts. Ages are in seconds at Now.
type Live struct {
	Now         time.Time  `json:"now"`
	Totals      LiveTotals `json:"totals"`
	Connections []LiveConn `json:"connections"`
}

// LiveTotals counts the connections and the live rollouts by state.
type LiveTotals struct {
	Connections int `json:"connections"`
	Sampling    int `json:"sampling"`
	Suspended   int `json:"suspended"`
	Queued      int `json:"queued"`
}

// LiveConn is one connection: shape "append", "public" or "http" (a POST in progress).
type LiveConn struct {
	ID            string        `json:"id"`
	Shape         string        `json:"shape"`
	Remote        string        `json:"remote,omitempty"`
	AgeS          float64       `json:"age_s"`
	Draining      bool          `json:"draining"`
	EndedRollouts int           `json:"ended_rollouts"`
	Rollouts      []LiveRollout `json:"rollouts"`
}

// LiveRollout is one live rollout. Tokens are cumulative over its turns as of its last
// suspension; context_tokens is the size of its context at its last sampling step.
type LiveRollout struct {
	ID            string  `json:"id"`
	State         string  `json:"state"`
	Turns         int     `json:"turns"`
	InputTokens   int     `json:"input_tokens"`
	CachedTokens  int     `json:"cached_tokens"`
	OutputTokens  int     `json:"output_tokens"`
	ContextTokens int     `json:"context_tokens"`
	AgeS          float64 `json:"age_s"`
	TurnAgeS      float64 `json:"turn_age_s"`
}

func liveOf(snap []server.ConnSnapshot, now time.Time) Live {
	l := Live{Now: now.UTC(), Connections: make([]LiveConn, 0, len(snap))}
	for _, c := range snap {
		lc := LiveConn{ID: c.ID, Shape: c.Shape, Remote: c.Remote, AgeS: now.Sub(c.Opened).Seconds(),
			Draining: c.Draining, EndedRollouts: c.Ended, Rollouts: make([]LiveRollout, 0, len(c.Rollouts))}
		for _, r := range c.Rollouts {
			lc.Rollouts = append(lc.Rollouts, LiveRollout{ID: r.Key, State: r.State, Turns: r.Turns,
				InputTokens: r.Usage.InputTokens, CachedTokens: r.Usage.InputTokensDetails.CachedTokens,
				OutputTokens: r.Usage.OutputTokens, ContextTokens: r.ContextTokens,
				AgeS: now.Sub(r.Started).Seconds(), TurnAgeS: now.Sub(r.TurnStarted).Seconds()})
			switch r.State {
			case "sampling":
				l.Totals.Sampling++
			case "suspended", "parked": // parked: suspended, holding no goroutine (-park-after)
				l.Totals.Suspended++
			default:
				l.Totals.Queued++
			}
		}
		l.Connections = append(l.Connections, lc)
	}
	l.Totals.Connections = len(l.Connections)
	return l
}

func (u *UI) live(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, liveOf(u.opts.Server.Snapshot(), time.Now()))
}
