package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tetherd/tether/internal/bench"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
)

// RaceConfig is the body of POST /ui/api/race. Zero fields take the defaults.
type RaceConfig struct {
	// Speed is the sim preset the race runs at in real time: "65", "1000" (default) or "4000"
	// tokens/s (metadata sim.speed).
	Speed string `json:"speed"`
	// Calls is the tool calls per rollout, 1..MaxCalls (default 20): Calls+1 turns.
	Calls int `json:"calls"`
	// Rollouts per transport, 1..MaxRollouts (default 1).
	Rollouts int `json:"rollouts"`
	// ToolOutputBytes is the size of each tool output, 64..MaxToolOutput (default 2048).
	ToolOutputBytes int `json:"tool_output_bytes"`
	// Transports to race, a subset of bench.Transports (default all four).
	Transports []string `json:"transports"`
}

// Bounds of RaceConfig and its defaults.
const (
	DefaultCalls    = 20
	MaxCalls        = 100
	MaxRollouts     = 3
	MaxToolOutput   = 16 << 10
	minToolOutput   = 64
	raceWarmupCalls = 1
)

func (c *RaceConfig) check() (sim.Speed, *protocol.Error) {
	bad := func(param, format string, args ...any) (sim.Speed, *protocol.Error) {
		return 0, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, param, format, args...)
	}
	if c.Speed == "" {
		c.Speed = "1000"
	}
	sp, err := sim.ParseSpeed(c.Speed)
	if err != nil || sp == sim.SpeedInstant {
		return bad("speed", "speed must be \"65\", \"1000\" or \"4000\" (tokens/s), got %q.", c.Speed)
	}
	if c.Calls == 0 {
		c.Calls = DefaultCalls
	}
	if c.Calls < 1 || c.Calls > MaxCalls {
		return bad("calls", "calls must be 1 to %d, got %d.", MaxCalls, c.Calls)
	}
	if c.Rollouts == 0 {
		c.Rollouts = 1
	}
	if c.Rollouts < 1 || c.Rollouts > MaxRollouts {
		return bad("rollouts", "rollouts must be 1 to %d, got %d.", MaxRollouts, c.Rollouts)
	}
	if c.ToolOutputBytes == 0 {
		c.ToolOutputBytes = bench.DefaultToolOutputBytes
	}
	if c.ToolOutputBytes < minToolOutput || c.ToolOutputBytes > MaxToolOutput {
		return bad("tool_output_bytes", "tool_output_bytes must be %d to %d, got %d.", minToolOutput, MaxToolOutput, c.ToolOutputBytes)
	}
	if len(c.Transports) == 0 {
		c.Transports = bench.Transports
	}
	seen := map[string]bool{}
	for _, t := range c.Transports {
		if _, err := bench.ParseTransports(t); err != nil || t == "all" || t == "" || t == bench.Engine || seen[t] {
			return bad("transports", "transports must name each of %v at most once, got %q.", bench.Transports, c.Transports)
		}
		seen[t] = true
	}
	return sp, nil
}

// Race states.
const (
	RaceRunning = "running"
	RaceDone    = "done"
	RaceFailed  = "failed"
)

// RaceState is the body of GET /ui/api/race and of POST's 202: the running or last race.
// Report is the bench report of a finished race (package internal/bench documents its keys;
// the page shows its numbers), SVG the bench's chart of it.
type RaceState struct {
	ID        string        `json:"id"`
	Status    string        `json:"status"`
	Config    RaceConfig    `json:"config"`
	StartedAt time.Time     `json:"started_at"`
	Error     string        `json:"error,omitempty"`
	Report    *bench.Report `json:"report,omitempty"`
	SVG       string        `json:"svg,omitempty"`
}

// race is one race: its state and the log of its events, replayed to each stream.
type race struct {
	// Immutable
	start time.Time

	mu     sync.Mutex // guards state, log, wake, closed
	state  RaceState
	log    [][]byte      // SSE-encoded events, in order
	wake   chan struct{} // closed and replaced when the log grows or the race ends
	closed bool          // the log is complete
}

func newRace(cfg RaceConfig) *race {
	now := time.Now()
	return &race{start: now, wake: make(chan struct{}),
		state: RaceState{ID: protocol.NewID("race"), Status: RaceRunning, Config: cfg, StartedAt: now.UTC()}}
}

func (r *race) snapshot() RaceState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// emit appends an event to the log; end marks the log complete.
func (r *race) emit(event string, v any, end bool) {
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"message": err.Error()})
		event = "error"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.log = append(r.log, protocol.AppendSSE(nil, event, data))
	r.closed = end
	close(r.wake)
	r.wake = make(chan struct{})
}

// from returns the events from index i on, a channel closed when there are more, and whether
// the log is complete.
func (r *race) from(i int) ([][]byte, <-chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.log[min(i, len(r.log)):], r.wake, r.closed
}

// TurnEvent is the data of a "turn" event: one turn of one transport, as the bench measured
// it (bench.TurnSample; its overhead_ms is the time to the turn's first output item, model
// time included), with the race's clock. Rollout 0 is the transport's warm-up.
type TurnEvent struct {
	Transport string  `json:"transport"`
	Turns     int     `json:"turns"`
	AtMS      float64 `json:"at_ms"` // since the race started
	// ModelFirstMS is the sim's time to the turn's first token at the race's preset: its time
	// to first token plus the prefill of the turn's prefill_tokens (sim.CostModel). ServerMS is
	// overhead_ms − ModelFirstMS: what the server and the transport added to the turn.
	ModelFirstMS float64 `json:"model_first_ms"`
	ServerMS     float64 `json:"server_ms"`
	bench.TurnSample
}

func turnEvent(t string, turns int, speed sim.Speed, start time.Time, s bench.TurnSample) TurnEvent {
	model := float64(speed.Cost().Duration(s.PrefillTokens, 0)) / float64(time.Millisecond)
	return TurnEvent{Transport: t, Turns: turns, AtMS: sinceMS(start), ModelFirstMS: model, ServerMS: s.OverheadMS - model, TurnSample: s}
}

// LaneEvent is the data of a "lane" event: one transport finished ("done") or failed.
type LaneEvent struct {
	Transport string  `json:"transport"`
	Status    string  `json:"status"`
	AtMS      float64 `json:"at_ms"`
	Error     string  `json:"error,omitempty"`
}

func (u *UI) startRace(w http.ResponseWriter, r *http.Request) {
	var cfg RaceConfig
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidJSON, "", "The race config is not valid JSON: %v.", err))
		return
	}
	speed, perr := cfg.check()
	if perr != nil {
		writeError(w, perr)
		return
	}
	if u.opts.URL == "" {
		writeError(w, &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer, Code: "race_unavailable",
			Message: "This server was not given its own URL, so it cannot race."})
		return
	}
	u.mu.Lock()
	if u.ctx.Err() != nil {
		u.mu.Unlock()
		writeError(w, &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer,
			Code: protocol.CodeShuttingDown, Message: "The server is shutting down."})
		return
	}
	if u.cur != nil && u.cur.snapshot().Status == RaceRunning {
		id := u.cur.snapshot().ID
		u.mu.Unlock()
		writeError(w, protocol.Errorf(http.StatusConflict, "race_in_progress", "",
			"Race %s is still running: one race runs at a time. Watch it, or start again when it ends.", id))
		return
	}
	rc := newRace(cfg)
	u.cur = rc
	u.wg.Add(1)
	u.mu.Unlock()
	st := rc.snapshot()
	rc.emit("race", st, false)
	key := bearer(r)
	go func() {
		defer u.wg.Done()
		u.run(rc, speed, key)
	}()
	writeJSON(w, http.StatusAccepted, st)
}

func (u *UI) getRace(w http.ResponseWriter, _ *http.Request) {
	u.mu.Lock()
	rc := u.cur
	u.mu.Unlock()
	if rc == nil {
		writeError(w, protocol.Errorf(http.StatusNotFound, "not_found", "", "No race has run on this server yet."))
		return
	}
	writeJSON(w, http.StatusOK, rc.snapshot())
}

// run races the transports at the same time, one bench.Run each, and merges their reports.
func (u *UI) run(rc *race, speed sim.Speed, apiKey string) {
	cfg := rc.state.Config // immutable once started
	ctx, cancel := context.WithTimeout(u.ctx, u.opts.RaceTimeout)
	defer cancel()
	u.log.Info("race started", "race", rc.state.ID, "speed", cfg.Speed, "calls", cfg.Calls, "rollouts", cfg.Rollouts)
	reps := make([]*bench.Report, len(cfg.Transports))
	errs := make([]error, len(cfg.Transports))
	var wg sync.WaitGroup
	for i, t := range cfg.Transports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = bench.Run(ctx, u.benchConfig(cfg, speed, apiKey, t, rc))
			ev := LaneEvent{Transport: t, Status: RaceDone, AtMS: sinceMS(rc.start)}
			if errs[i] != nil {
				ev.Status, ev.Error = RaceFailed, errs[i].Error()
				cancel() // one lane failed: the race has no result, stop the others
			}
			rc.emit("lane", ev, false)
		}()
	}
	wg.Wait()
	var rep *bench.Report
	err := errors.Join(errs...)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("the race did not finish within %v: %w", u.opts.RaceTimeout, err)
	case err != nil && u.ctx.Err() != nil:
		err = fmt.Errorf("the server is shutting down: %w", err)
	case err == nil:
		rep, err = bench.Merge(reps...)
	}
	rc.finish(rep, err)
	u.log.Info("race ended", "race", rc.state.ID, "status", rc.snapshot().Status, "elapsed", time.Since(rc.start).Round(time.Millisecond))
}

func (u *UI) benchConfig(cfg RaceConfig, speed sim.Speed, apiKey, transport string, rc *race) bench.Config {
	turns := cfg.Calls + 1
	return bench.Config{
		URL: u.opts.URL, APIKey: apiKey, Transports: []string{transport},
		Rollouts: cfg.Rollouts, Calls: cfg.Calls, ToolOutputBytes: cfg.ToolOutputBytes, WarmupCalls: raceWarmupCalls,
		Realtime: true, RealtimeSpeed: speed, StreamTokens: -1, Concurrent: -1, Timeout: u.opts.RaceTimeout,
		OnTurn: func(t string, s bench.TurnSample) {
			n := turns
			if s.Rollout == 0 {
				n = raceWarmupCalls + 1
			}
			rc.emit("turn", turnEvent(t, n, speed, rc.start, s), false)
		},
	}
}

// finish records the race's result and ends its log with "done" (the RaceState with the
// report and chart) or "error".
func (rc *race) finish(rep *bench.Report, err error) {
	rc.mu.Lock()
	if err != nil {
		rc.state.Status, rc.state.Error = RaceFailed, err.Error()
	} else {
		rep.Command = "tether serve -ui"
		rc.state.Status, rc.state.Report, rc.state.SVG = RaceDone, rep, rep.SVG()
	}
	st := rc.state
	rc.mu.Unlock()
	if err != nil {
		rc.emit("error", map[string]string{"message": st.Error}, true)
		return
	}
	rc.emit("done", st, true)
}

func sinceMS(t time.Time) float64 { return float64(time.Since(t)) / float64(time.Millisecond) }

// events streams the current race's events as SSE: every event so far, then each new one,
// until the race's log ends (Close ends it by cancelling the race) or the client goes.
func (u *UI) events(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	rc := u.cur
	full := u.streams >= MaxStreams
	if rc != nil && !full && u.ctx.Err() == nil {
		u.streams++
		u.wg.Add(1)
	}
	u.mu.Unlock()
	switch {
	case rc == nil:
		writeError(w, protocol.Errorf(http.StatusNotFound, "not_found", "", "No race has run on this server yet."))
		return
	case full:
		writeError(w, &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer, Code: "too_many_streams",
			Message: fmt.Sprintf("This server serves at most %d race streams at once.", MaxStreams)})
		return
	case u.ctx.Err() != nil:
		writeError(w, &protocol.Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeServer,
			Code: protocol.CodeShuttingDown, Message: "The server is shutting down."})
		return
	}
	defer func() {
		u.mu.Lock()
		u.streams--
		u.mu.Unlock()
		u.wg.Done()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rcw := http.NewResponseController(w)
	for i := 0; ; {
		evs, wake, closed := rc.from(i)
		for _, e := range evs {
			if _, err := w.Write(e); err != nil {
				return
			}
		}
		i += len(evs)
		if err := rcw.Flush(); err != nil || closed && len(evs) == 0 {
			return
		}
		if closed {
			continue // one more pass sends nothing and returns
		}
		select { // Close cancels the race, whose log then ends with its "error" event
		case <-wake:
		case <-r.Context().Done():
			return
		}
	}
}
