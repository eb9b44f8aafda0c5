package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/tetherd/tether/internal/peer"
)

// runner is what the workers share.
type runner struct {
	cfg Config
	t   *target
	st  *stats
}

// tool is the one function tool of every rollout: shell-like, so the sim calls it.
var tool = map[string]any{
	"type": "function", "name": "exec_command", "description": "Run a shell command.",
	"parameters": map[string]any{"type": "object",
		"properties": map[string]any{"cmd": map[string]any{"type": "string"}},
		"required":   []string{"cmd"}},
}

// refusals are the error codes with which a server may refuse a create under load; the
// rollout is then counted as refused, not as a violation.
var refusals = map[string]bool{
	"rollout_limit_reached":              true,
	"websocket_queue_limit_reached":      true,
	"server_shutting_down":               true,
	"websocket_connection_limit_reached": true,
}

// chaos is the disruption planned for one rollout (at most one kind per rollout; bad frames
// and bad appends come on top, per turn).
type chaos int

const (
	chaosNone chaos = iota
	chaosDisconnect
	chaosCancel
	chaosSlow
	chaosStall
)

type plan struct {
	kind     chaos
	turn     int  // the suspension it happens at (1…M), or after which continuation (0…M) when sampling
	sampling bool // while the server streams (after a create or continuation) rather than while suspended
}

// worker holds one connection slot: it runs rollouts of its shape one after another,
// reconnecting whenever a connection is dropped.
type worker struct {
	id    int
	shape shape
	r     *runner
	rng   *rand.Rand
	c     *conn
	n     int        // rollouts started
	calm  bool       // no chaos (the warm-up)
	grp   *sockGroup // with Config.Lanes: the socket this worker shares, in lane
	lane  string
}

// rollout is the client's record of one rollout: what it sent, what it planned.
type rollout struct {
	w              *worker
	tag            string
	lane           string // stream_id ("" for the default lane)
	id             string // append: the response id; public: the current segment's id
	user           string
	meta           map[string]string
	plan           plan
	sent           []string       // the quote lines the answer must hold: the user text, then each tool output
	answered       map[string]int // call_id → outputs appended / sent in continuations
	callIDs        map[string]int // call_id → times the server issued it
	lastAnswered   string         // a call_id answered by an earlier append
	cancelSent     bool
	cancelAnswered bool // the cancel's response_already_completed arrived
	stalled        bool // the client stopped reading for StallPause
	slowed         bool // the client stopped reading for SlowPause
}

func (r *rollout) fail(format string, args ...any) {
	var trail []string
	if r.w.c != nil {
		trail = r.w.c.recent()
	}
	r.w.r.st.violation(trail, "%s %s %s: %s", r.w.shape, r.tag, r.id, fmt.Sprintf(format, args...))
}

func (w *worker) newRollout() *rollout {
	cfg := w.r.cfg
	w.n++
	tag := fmt.Sprintf("%s-w%d-r%d", w.shape.String()[:1], w.id, w.n)
	r := &rollout{w: w, tag: tag, answered: map[string]int{}, callIDs: map[string]int{},
		user: fmt.Sprintf("[%s] soak: run %d checks, then report", tag, cfg.Turns),
		meta: map[string]string{"sim.calls": strconv.Itoa(cfg.Turns)}}
	r.sent = []string{quoteLine("user", r.user)}
	switch {
	case w.lane != "":
		r.lane = w.lane
	case cfg.Lanes > 0:
		r.lane = fmt.Sprintf("lane-%d", w.n%cfg.Lanes)
	}
	if w.calm {
		return r
	}
	rt := cfg.Rates
	x := w.rng.Float64()
	if w.n == 1 {
		// The first rollout of some workers gets one kind of chaos for sure, so that a short
		// run (or a slow machine) still exercises each kind at least once.
		switch w.id % 7 {
		case 1:
			x = 0 // disconnect
		case 3:
			x = rt.Disconnect // cancel (append shape), else the next kind
		case 5:
			x = rt.Disconnect + rt.Cancel // slow reader
		}
	}
	pick := func(p float64) bool {
		if p <= 0 {
			return false
		}
		x -= p
		return x < 0
	}
	switch {
	case pick(rt.Disconnect):
		r.plan = plan{kind: chaosDisconnect, sampling: w.rng.Intn(2) == 0}
	case w.shape == appendShape && pick(rt.Cancel):
		r.plan = plan{kind: chaosCancel, sampling: w.rng.Intn(2) == 0}
	case w.grp != nil: // a slow or stalled reader would hold back every lane of the socket
	case pick(rt.Slow):
		r.plan = plan{kind: chaosSlow, sampling: true, turn: cfg.Turns}
	case cfg.StallPause > 0 && pick(rt.Stall):
		r.plan = plan{kind: chaosStall, sampling: true, turn: cfg.Turns}
	}
	switch r.plan.kind {
	case chaosDisconnect, chaosCancel:
		if r.plan.sampling {
			r.plan.turn = w.rng.Intn(cfg.Turns + 1)
		} else {
			r.plan.turn = 1 + w.rng.Intn(cfg.Turns)
		}
	case chaosSlow, chaosStall:
		r.meta["sim.answer_tokens"] = strconv.Itoa(cfg.BigAnswer)
	}
	return r
}

// toolOutput is the output the client appends for a call: unique within its first 64
// characters, sometimes long, with escapes and multi-byte characters.
func (w *worker) toolOutput(r *rollout, step int, callID string) string {
	tail := callID
	if len(tail) > 8 {
		tail = tail[len(tail)-8:]
	}
	base := fmt.Sprintf("[%s] step %d %s", r.tag, step, tail)
	switch w.rng.Intn(4) {
	case 0:
		return base + " \"quoted\" back\\slash\ttab\nnewline ✓ ünïcødé " + strings.Repeat("xyz ", 20)
	case 1:
		return base + " " + strings.Repeat("é", 70)
	case 2:
		return base + ": exit 0"
	}
	return base + " ok"
}

func (w *worker) createBody(r *rollout, prev string, input any) map[string]any {
	m := map[string]any{"type": "response.create", "model": "sim", "input": input,
		"tools": []any{tool}, "metadata": r.meta, "store": false}
	if prev != "" {
		m["previous_response_id"] = prev
	}
	if r.lane != "" {
		m["stream_id"] = r.lane
	}
	return m
}

// loop runs rollouts until stop is closed (no new rollouts) or ctx ends (hard deadline).
func (w *worker) loop(ctx context.Context, stop <-chan struct{}) {
	defer w.leave()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		if w.c == nil {
			if !w.connect(ctx) {
				if !sleep(ctx, stop, backoff) {
					return
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
		}
		o := w.rollout(ctx)
		w.r.st.outcome(w.shape, o)
		if o == outRefused && !sleep(ctx, stop, time.Duration(50+w.rng.Intn(200))*time.Millisecond) {
			return
		}
	}
}

func (w *worker) rollout(ctx context.Context) outcome {
	if w.shape == appendShape {
		return w.appendRollout(ctx)
	}
	return w.publicRollout(ctx)
}

func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

func (w *worker) connect(ctx context.Context) bool {
	st := w.r.st
	var c *conn
	var err error
	if w.grp != nil {
		c, err = w.grp.attach(ctx, w.lane)
	} else {
		st.dials.Add(1)
		c, err = w.r.t.dial(ctx, w.shape)
	}
	if err != nil {
		st.dialFailures.Add(1)
		if ue, ok := err.(*upgradeError); ok {
			st.count(&st.errorCodes, "upgrade "+strconv.Itoa(ue.status)+" "+ue.code)
		} else if ctx.Err() == nil {
			st.count(&st.errorCodes, "dial failed")
		}
		return false
	}
	w.c = c
	st.openConns.Add(1)
	return true
}

// discard drops the connection (the next rollout reconnects).
func (w *worker) discard(graceful bool) {
	if w.c == nil {
		return
	}
	st := w.r.st
	st.frames.Add(w.c.frames)
	st.bytes.Add(w.c.bytes)
	w.c.close(graceful)
	w.c = nil
	st.openConns.Add(-1)
}

// leave ends the worker: its own connection is dropped; a lane worker detaches from the
// shared socket, which the last lane closes.
func (w *worker) leave() {
	if w.c == nil || w.c.mux == nil {
		w.discard(false)
		return
	}
	st := w.r.st
	st.frames.Add(w.c.frames)
	st.bytes.Add(w.c.bytes)
	w.c.cancel()
	w.c.mux.leave(w.lane)
	w.c = nil
	st.openConns.Add(-1)
}

// disconnect is the chaos disconnect: abrupt most of the time, sometimes a normal close.
func (w *worker) disconnect() outcome {
	w.discard(w.rng.Intn(4) == 0)
	return outAborted
}

func countRequired(ex []expectation) int {
	n := 0
	for _, e := range ex {
		if !e.optional {
			n++
		}
	}
	return n
}

// lost handles a failed read or write.
func (w *worker) lost(ctx context.Context, r *rollout, err error) outcome {
	defer w.discard(false)
	switch {
	case ctx.Err() != nil:
		return outInterrupted
	case r.stalled:
		return outDropped
	case w.c.mux != nil && w.c.mux.droppedByLane():
		return outAborted // another lane of the socket dropped it
	case r.slowed:
		// A slow reader that had paused less than the write timeout, dropped anyway: its pong
		// queues behind the backlog it has to drain (the ping interval bounds the whole
		// drain). Reported, not a violation.
		w.r.st.slowDropped.Add(1)
		return outDropped
	}
	r.fail("connection lost: %v", err)
	return outBroken
}

// onError handles an error frame. owed: it answered a frame the client sent on purpose;
// refusal: a capacity code; otherwise a violation was recorded.
func (w *worker) onError(f frame, r *rollout) (owed bool, refusal string) {
	st := w.r.st
	code := "<undecodable>"
	if ev, err := decodeEvent(f); err == nil && ev.Error != nil {
		code = ev.Error.Code
		if ev.Status == 0 || ev.Error.Type == "" || ev.Error.Message == "" {
			r.fail("error frame without status, type or message: %.300s", f.data)
		}
	}
	st.count(&st.errorCodes, code)
	c := w.c
	for len(c.expect) > 0 {
		e := c.expect[0]
		c.expect = c.expect[1:]
		if e.code == code {
			if e.what == "cancel" {
				r.cancelAnswered = true
			} else {
				st.badAnswered.Add(1)
			}
			return true, ""
		}
		if e.optional {
			continue
		}
		r.fail("%s: expected error %s, got %.300s", e.what, e.code, f.data)
		return true, ""
	}
	if refusals[code] {
		return false, code
	}
	r.fail("unexpected error frame %.300s", f.data)
	return false, ""
}

// expect records an error frame the server owes.
func (w *worker) expect(code, what string, optional bool) {
	w.c.expect = append(w.c.expect, expectation{code: code, what: what, optional: optional})
}

// dropOptional forgets the optional expectation for what (the cancel took effect).
func (w *worker) dropOptional(what string) {
	ex := w.c.expect[:0]
	for _, e := range w.c.expect {
		if !(e.optional && e.what == what) {
			ex = append(ex, e)
		}
	}
	w.c.expect = ex
}

// settleOwed reads until every owed error frame has arrived; nothing else may arrive. false:
// the connection was discarded with outcome o.
func (w *worker) settleOwed(ctx context.Context, r *rollout) (o outcome, ok bool) {
	for countRequired(w.c.expect) > 0 {
		f, err := w.c.read(ctx)
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				w.r.st.errorsLost.Add(int64(countRequired(w.c.expect)))
			}
			return w.lost(ctx, r, err), false
		}
		if f.typ != "error" {
			r.fail("unexpected %.300s while waiting for %d error frame(s)", f.data, countRequired(w.c.expect))
			w.discard(false)
			return outBroken, false
		}
		if owed, _ := w.onError(f, r); !owed {
			w.discard(false)
			return outBroken, false
		}
	}
	// optional expectations left over can no longer be answered
	w.c.expect = w.c.expect[:0]
	return 0, true
}

// sendBad sends a bad frame and records the error it is owed. quiet: nothing else runs on
// the connection, so wait for the answer.
func (w *worker) sendBad(ctx context.Context, r *rollout, quiet bool) (outcome, bool) {
	list := badFramesFor(w.shape)
	b := list[w.rng.Intn(len(list))]
	var err error
	if b.binary {
		err = w.c.sendBinary(ctx, []byte(b.data))
	} else {
		err = w.c.send(ctx, []byte(b.data))
	}
	if err != nil {
		return w.lost(ctx, r, err), false
	}
	w.r.st.badFrames.Add(1)
	w.expect(b.code, "bad frame ("+b.name+")", false)
	if quiet {
		return w.settleOwed(ctx, r)
	}
	return 0, true
}

// sendBadAppend sends a rejected append to the suspended rollout (which must stay suspended
// with the same pending calls) and waits for its error.
func (w *worker) sendBadAppend(ctx context.Context, r *rollout, pending []string) (outcome, bool) {
	fco := func(id, out string) map[string]any {
		return map[string]any{"type": "function_call_output", "call_id": id, "output": out}
	}
	var input []any
	var code, name string
	switch k := w.rng.Intn(6); {
	case k == 0:
		input, code, name = []any{fco("call_00000000000000000000000000000000", "BAD-APPEND unknown call")}, "tool_call_not_found", "unknown call_id"
	case k == 1:
		input, code, name = []any{}, "missing_tool_output", "empty input"
	case k == 2:
		input, code, name = []any{fco(pending[0], "BAD-APPEND dup 1"), fco(pending[0], "BAD-APPEND dup 2")}, "duplicate_tool_output", "two outputs for one call"
	case k == 3:
		input, code, name = []any{map[string]any{"role": "user", "content": "BAD-APPEND message first"}, fco(pending[0], "BAD-APPEND after message")}, "invalid_value", "message before the output"
	case k == 4 && r.lastAnswered != "":
		input, code, name = []any{fco(r.lastAnswered, "BAD-APPEND answered again")}, "tool_call_not_found", "call answered before"
	default:
		input, code, name = []any{map[string]any{"type": "reasoning", "summary": []any{}}}, "invalid_value", "item of the wrong type"
	}
	if err := w.c.sendJSON(ctx, map[string]any{"type": "response.append", "response_id": r.id, "input": input}); err != nil {
		return w.lost(ctx, r, err), false
	}
	w.r.st.badAppends.Add(1)
	w.expect(code, "bad append ("+name+")", false)
	return w.settleOwed(ctx, r)
}

// pause stops reading for a slow or stalled reader.
func (w *worker) pause(ctx context.Context, r *rollout) {
	st := w.r.st
	d := w.r.cfg.SlowPause
	if r.plan.kind == chaosStall {
		d = w.r.cfg.StallPause
		r.stalled = true
		st.stalledReaders.Add(1)
	} else {
		r.slowed = true
		st.slowReaders.Add(1)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// afterSend applies the chaos planned for the sampling phase that follows the create or
// continuation sent after suspension step. It returns the frames to read before dropping the
// connection (-1: none) and whether to pause reading.
func (w *worker) afterSend(ctx context.Context, r *rollout, step int) (dropAfter int, pause bool, o outcome, ok bool) {
	dropAfter = -1
	if w.calm {
		return dropAfter, false, 0, true
	}
	if w.grp == nil && w.rng.Float64() < w.r.cfg.Rates.BadFrame/2 {
		if o, ok := w.sendBad(ctx, r, false); !ok {
			return dropAfter, false, o, false
		}
	}
	if !r.plan.sampling || r.plan.turn != step {
		return dropAfter, false, 0, true
	}
	switch r.plan.kind {
	case chaosDisconnect:
		dropAfter = 1 + w.rng.Intn(4)
	case chaosCancel:
		if r.id != "" { // at step 0 the id comes with response.created
			if o, ok := w.cancel(ctx, r, true); !ok {
				return dropAfter, false, o, false
			}
		}
	case chaosSlow, chaosStall:
		pause = true
	}
	return dropAfter, pause, 0, true
}

// cancel sends response.cancel. While sampling it races with the rollout's end: the cancel is
// then answered response_already_completed.
func (w *worker) cancel(ctx context.Context, r *rollout, sampling bool) (outcome, bool) {
	if err := w.c.sendJSON(ctx, map[string]any{"type": "response.cancel", "response_id": r.id}); err != nil {
		return w.lost(ctx, r, err), false
	}
	r.cancelSent = true
	if sampling {
		w.r.st.cancelsSampling.Add(1)
		w.expect("response_already_completed", "cancel", true)
	} else {
		w.r.st.cancelsSuspended.Add(1)
	}
	return 0, true
}

// quietChaos runs the chaos of a suspension while nothing runs on the connection: bad frames
// and (append shape) a rejected append, each answered before the next.
func (w *worker) quietChaos(ctx context.Context, r *rollout, pending []string) (outcome, bool) {
	if w.calm {
		return 0, true
	}
	if w.grp == nil && w.rng.Float64() < w.r.cfg.Rates.BadFrame {
		if o, ok := w.sendBad(ctx, r, true); !ok {
			return o, false
		}
	}
	if w.shape == appendShape && len(pending) > 0 && w.rng.Float64() < w.r.cfg.Rates.BadAppend {
		return w.sendBadAppend(ctx, r, pending)
	}
	return 0, true
}

// next reads the rollout's next frame other than an error frame, carrying out a planned
// disconnect (after dropAfter more frames) or reader pause and answering error frames. ok is
// false, with the outcome, when the rollout is over.
func (w *worker) next(ctx context.Context, r *rollout, dropAfter *int, pause *bool, started bool) (frame, outcome, bool) {
	for {
		if *dropAfter == 0 {
			w.r.st.disconnectsSampling.Add(1)
			return frame{}, w.disconnect(), false
		}
		if *pause {
			*pause = false
			w.pause(ctx, r)
		}
		f, err := w.c.read(ctx)
		if err != nil {
			return frame{}, w.lost(ctx, r, err), false
		}
		if *dropAfter > 0 {
			*dropAfter--
		}
		if f.typ != "error" {
			if got := streamID(f.data); got != r.lane {
				r.fail("%s carries stream_id %q, want %q (the rollout's lane)", f.typ, got, r.lane)
				w.discard(false)
				return frame{}, outBroken, false
			}
			return f, 0, true
		}
		owed, refusal := w.onError(f, r)
		switch {
		case owed:
			continue
		case refusal != "" && !started:
			return frame{}, outRefused, false
		}
		w.discard(false)
		return frame{}, outBroken, false
	}
}

// appendRollout runs one append-shape rollout: create, then at every response.done one
// response.append with an output per pending call, until the terminal event.
func (w *worker) appendRollout(ctx context.Context) outcome {
	st, cfg := w.r.st, w.r.cfg
	r := w.newRollout()
	sp := newSpace(r)
	if err := w.c.sendJSON(ctx, w.createBody(r, "", r.user)); err != nil {
		return w.lost(ctx, r, err)
	}
	dropAfter, pause, o, ok := w.afterSend(ctx, r, 0)
	if !ok {
		return o
	}
	var last usage
	step, started := 0, false
	for {
		f, o, ok := w.next(ctx, r, &dropAfter, &pause, started)
		if !ok {
			return o
		}
		switch {
		case f.typ == "response.created":
			ev, err := decodeEvent(f)
			if err != nil || ev.Response == nil {
				r.fail("bad response.created %.300s", f.data)
				w.discard(false)
				return outBroken
			}
			if started {
				r.fail("a second response.created %.200s", f.data)
			}
			started = true
			r.id = ev.Response.ID
			sp.seq(f)
			if ev.Response.Status != "in_progress" || len(ev.Response.Output) != 0 {
				r.fail("response.created with status %q and %d output items", ev.Response.Status, len(ev.Response.Output))
			}
			if r.plan.kind == chaosCancel && r.plan.sampling && r.plan.turn == 0 {
				if o, ok := w.cancel(ctx, r, true); !ok {
					return o
				}
			}
		case f.typ == "response.in_progress":
			sp.seq(f)
		case f.typ == "response.done":
			sp.seq(f)
			ev, err := decodeEvent(f)
			if err != nil {
				r.fail("%v", err)
				w.discard(false)
				return outBroken
			}
			if ev.ResponseID != r.id {
				r.fail("response.done for %s", ev.ResponseID)
			}
			sp.checkClosed("response.done")
			items := sp.sinceMark()
			st.itemsVerified.Add(int64(sp.compareItems(ev.Output, items, fmt.Sprintf("response.done %d output", step+1))))
			var calls []string
			for _, d := range items {
				if d.it.Type == "function_call" {
					calls = append(calls, d.it.CallID)
					r.callIDs[d.it.CallID]++
				} else {
					r.fail("response.done after a %s item", d.it.Type)
				}
			}
			w.comparePending(r, ev.PendingCallIDs, calls)
			r.checkUsage(ev.Usage, "response.done")
			if ev.Usage != nil {
				if ev.Usage.Input < last.Input || ev.Usage.Output < last.Output || ev.Usage.Details.Cached < last.Details.Cached {
					r.fail("response.done usage %+v is below the previous one %+v (usage is cumulative)", *ev.Usage, last)
				}
				last = *ev.Usage
			}
			step++
			st.steps.Add(1)
			if r.cancelSent {
				continue // the cancel ends it
			}
			if step > cfg.Turns {
				r.fail("suspension %d: more than sim.calls=%d tool-call steps", step, cfg.Turns)
			}
			if r.plan.kind == chaosDisconnect && !r.plan.sampling && r.plan.turn == step {
				st.disconnectsSuspended.Add(1)
				return w.disconnect()
			}
			if r.plan.kind == chaosCancel && !r.plan.sampling && r.plan.turn == step {
				if o, ok := w.cancel(ctx, r, false); !ok {
					return o
				}
				continue
			}
			if o, ok := w.quietChaos(ctx, r, ev.PendingCallIDs); !ok {
				return o
			}
			input := make([]any, 0, len(ev.PendingCallIDs))
			for _, id := range ev.PendingCallIDs {
				out := w.toolOutput(r, step, id)
				input = append(input, map[string]any{"type": "function_call_output", "call_id": id, "output": out})
				r.answered[id]++
				r.sent = append(r.sent, quoteLine("tool", out))
				r.lastAnswered = id
			}
			if err := w.c.sendJSON(ctx, map[string]any{"type": "response.append", "response_id": r.id, "input": input}); err != nil {
				return w.lost(ctx, r, err)
			}
			if dropAfter, pause, o, ok = w.afterSend(ctx, r, step); !ok {
				return o
			}
		case peer.IsTerminal(f.typ):
			sp.seq(f)
			return w.finishAppend(ctx, r, sp, f)
		default:
			sp.event(f)
		}
	}
}

// comparePending checks pending_call_ids against the calls streamed since the last suspension.
func (w *worker) comparePending(r *rollout, pending, calls []string) {
	st := w.r.st
	n := map[string]int{}
	for _, id := range pending {
		n[id]++
	}
	for _, id := range calls {
		switch n[id] {
		case 0:
			st.itemsLost.Add(1)
			r.fail("call %s is not in pending_call_ids %v", id, pending)
		case 1:
		default:
			st.itemsDuplicated.Add(int64(n[id] - 1))
			r.fail("call %s is %d times in pending_call_ids", id, n[id])
		}
		delete(n, id)
	}
	for id := range n {
		r.fail("pending_call_ids names %s, which was not streamed", id)
	}
	if len(pending) == len(calls) && fmt.Sprint(pending) != fmt.Sprint(calls) {
		r.fail("pending_call_ids %v are not in output order %v", pending, calls)
	}
}

// finishAppend verifies an append rollout's terminal event: its output against the streamed
// items, every call answered exactly once, the answer quoting every sent item.
func (w *worker) finishAppend(ctx context.Context, r *rollout, sp *space, f frame) outcome {
	st, cfg := w.r.st, w.r.cfg
	ev, err := decodeEvent(f)
	if err != nil || ev.Response == nil {
		r.fail("bad terminal event %.300s", f.data)
		w.discard(false)
		return outBroken
	}
	resp := ev.Response
	if resp.ID != r.id {
		r.fail("terminal event of %s", resp.ID)
	}
	sp.checkClosed(f.typ)
	st.itemsVerified.Add(int64(sp.compareItems(resp.Output, sp.done, "terminal output")))
	r.checkUsage(resp.Usage, f.typ)
	var calls []item
	var msg *item
	for i, d := range sp.done {
		switch d.it.Type {
		case "function_call":
			calls = append(calls, d.it)
		case "message":
			if i != len(sp.done)-1 {
				r.fail("message %s is not the last item", d.it.ID)
			}
			msg = &sp.done[i].it
		default:
			r.fail("unexpected %s item", d.it.Type)
		}
	}
	if len(sp.done) > sp.mark {
		for _, d := range sp.done[sp.mark:] {
			if d.it.Type == "function_call" {
				r.callIDs[d.it.CallID]++
			}
		}
	}
	for id, n := range r.callIDs {
		if n > 1 {
			st.itemsDuplicated.Add(int64(n - 1))
			r.fail("call_id %s issued %d times", id, n)
		}
	}
	inOutput := map[string]bool{}
	for _, c := range calls {
		inOutput[c.CallID] = true
	}
	for id := range r.answered {
		if !inOutput[id] {
			st.itemsLost.Add(1)
			r.fail("the client answered call %s, which is not in the terminal output", id)
		}
	}
	if r.stalled {
		st.stallsNotDropped.Add(1)
	}
	o := outCompleted
	switch f.typ {
	case "response.completed":
		if resp.Status != "completed" {
			r.fail("response.completed with status %q", resp.Status)
		}
		if len(calls) != cfg.Turns {
			r.fail("completed with %d calls, expected sim.calls=%d", len(calls), cfg.Turns)
		}
		for _, c := range calls {
			if r.answered[c.CallID] != 1 {
				r.fail("call %s was answered %d times", c.CallID, r.answered[c.CallID])
			}
		}
		if msg == nil {
			r.fail("completed without an answer")
		} else {
			st.itemsVerified.Add(int64(r.compareQuotes(msg.text(), false)))
		}
		if r.cancelSent && !r.cancelAnswered {
			st.cancelRaceLost.Add(1)
			w.dropOptional("cancel")
			w.expect("response_already_completed", "cancel", false)
		}
	case "response.incomplete":
		reason := ""
		if resp.IncompleteDetails != nil {
			reason = resp.IncompleteDetails.Reason
		}
		if !r.cancelSent || reason != "cancelled" {
			r.fail("incomplete, reason %q (cancel sent: %v)", reason, r.cancelSent)
		}
		if r.cancelAnswered {
			r.fail("cancelled, but the cancel was also answered response_already_completed")
		}
		w.dropOptional("cancel")
		if msg != nil {
			st.itemsVerified.Add(int64(r.compareQuotes(msg.text(), true)))
		}
		o = outCancelled
	default:
		r.fail("rollout failed: %.300s", f.data)
		w.discard(false)
		return outBroken
	}
	if o2, ok := w.settleOwed(ctx, r); !ok {
		return o2
	}
	return o
}

// publicRollout runs one public-shape rollout: a chain of segments, each continuation a
// response.create with previous_response_id and one function_call_output per call.
func (w *worker) publicRollout(ctx context.Context) outcome {
	st, cfg := w.r.st, w.r.cfg
	r := w.newRollout()
	prev := ""
	var input any = r.user
	for step := 0; ; step++ {
		if err := w.c.sendJSON(ctx, w.createBody(r, prev, input)); err != nil {
			return w.lost(ctx, r, err)
		}
		dropAfter, pause, o, ok := w.afterSend(ctx, r, step)
		if !ok {
			return o
		}
		sp := newSpace(r)
		started := false
		var term *event
		var termFrame frame
		for term == nil {
			f, o, ok := w.next(ctx, r, &dropAfter, &pause, started)
			if !ok {
				return o
			}
			switch {
			case f.typ == "response.created":
				ev, err := decodeEvent(f)
				if err != nil || ev.Response == nil {
					r.fail("bad response.created %.300s", f.data)
					w.discard(false)
					return outBroken
				}
				if started {
					r.fail("a second response.created in one segment")
				}
				started = true
				r.id = ev.Response.ID
				sp.seq(f)
				if got := ev.Response.PreviousResponseID; (prev == "" && got != nil && *got != "") || (prev != "" && (got == nil || *got != prev)) {
					r.fail("response.created echoes previous_response_id %v, sent %q", got, prev)
				}
			case f.typ == "response.in_progress":
				sp.seq(f)
			case peer.IsTerminal(f.typ):
				sp.seq(f)
				ev, err := decodeEvent(f)
				if err != nil || ev.Response == nil {
					r.fail("bad terminal event %.300s", f.data)
					w.discard(false)
					return outBroken
				}
				term, termFrame = ev, f
			default:
				sp.event(f)
			}
		}
		resp := term.Response
		if termFrame.typ != "response.completed" || resp.Status != "completed" {
			r.fail("segment %d ended %s: %.300s", step, termFrame.typ, termFrame.data)
			w.discard(false)
			return outBroken
		}
		if resp.ID != r.id {
			r.fail("terminal event of %s", resp.ID)
		}
		sp.checkClosed(termFrame.typ)
		st.itemsVerified.Add(int64(sp.compareItems(resp.Output, sp.done, fmt.Sprintf("segment %d output", step))))
		r.checkUsage(resp.Usage, "segment")
		if step > 0 && resp.Usage != nil && resp.Usage.Details.Cached == 0 {
			st.coldContinuations.Add(1)
		}
		st.steps.Add(1)
		var calls []string
		var msg *item
		for i, d := range sp.done {
			switch d.it.Type {
			case "function_call":
				calls = append(calls, d.it.CallID)
				r.callIDs[d.it.CallID]++
				if r.callIDs[d.it.CallID] > 1 {
					st.itemsDuplicated.Add(1)
					r.fail("call_id %s issued again", d.it.CallID)
				}
			case "message":
				msg = &sp.done[i].it
			default:
				r.fail("unexpected %s item", d.it.Type)
			}
		}
		if msg != nil {
			if len(calls) > 0 {
				r.fail("segment %d has both calls and an answer", step)
			}
			if step != cfg.Turns {
				r.fail("answered after %d tool-call steps, expected sim.calls=%d", step, cfg.Turns)
			}
			st.itemsVerified.Add(int64(r.compareQuotes(msg.text(), false)))
			if r.stalled {
				st.stallsNotDropped.Add(1)
			}
			if o, ok := w.settleOwed(ctx, r); !ok {
				return o
			}
			return outCompleted
		}
		if len(calls) == 0 {
			r.fail("segment %d has neither calls nor an answer", step)
			w.discard(false)
			return outBroken
		}
		if step >= cfg.Turns {
			r.fail("segment %d calls a tool: more than sim.calls=%d tool-call steps", step, cfg.Turns)
		}
		if r.plan.kind == chaosDisconnect && !r.plan.sampling && r.plan.turn == step+1 {
			st.disconnectsSuspended.Add(1)
			return w.disconnect()
		}
		if o, ok := w.quietChaos(ctx, r, calls); !ok {
			return o
		}
		items := make([]any, 0, len(calls))
		for _, id := range calls {
			out := w.toolOutput(r, step+1, id)
			items = append(items, map[string]any{"type": "function_call_output", "call_id": id, "output": out})
			r.answered[id]++
			r.sent = append(r.sent, quoteLine("tool", out))
		}
		prev, input = r.id, items
	}
}
