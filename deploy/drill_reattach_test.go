package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/client"
)

// reattachFigures are the outcome counters of the drill's reattaching clients: append-shape
// rollouts through the Go client package, which opts into reattachment by default.
type reattachFigures struct {
	rollouts, completed atomic.Int64
	// liveSteps are the steps after an append on the connection that held the rollout;
	// liveHot those whose cached_tokens covered the previous context.
	liveSteps, liveHot atomic.Int64
	// parked are the steps that followed at least one response.parked of their Response;
	// sameID those that continued the same Response, hot those whose cached_tokens covered the
	// previous context.
	parked, sameID, hot atomic.Int64
	// killed are rollouts whose connection dropped without a terminal event (SIGKILL), of which
	// parkedKilled had been parked and resumed just before; drainCut those a drain ended
	// response.incomplete while they sampled; coldContinued those the client continued as a new
	// Response after the server ended them (server_shutdown) while suspended. All three resume
	// cold.
	killed, parkedKilled, drainCut, coldContinued atomic.Int64
	// refused are requests answered server_shutting_down or websocket_connection_limit_reached,
	// sent again.
	refused atomic.Int64
	// parkEvents are the response.parked events the clients received.
	parkEvents atomic.Int64
}

// hotShare is the share of the rollouts a SIGTERM caught suspended (parked, or ended by the
// drain instead) that resumed hot, in percent; -1 when there were none.
func (f *reattachFigures) hotShare() float64 {
	n := f.parked.Load() + f.coldContinued.Load()
	if n == 0 {
		return -1
	}
	return 100 * float64(f.hot.Load()) / float64(n)
}

func (f *reattachFigures) String() string {
	return fmt.Sprintf("reattach: rollouts %d started, %d completed and verified; %d response.parked; "+
		"%d SIGTERM-parked rollouts resumed, %d with the same Response id, %d hot; %d suspended "+
		"rollouts ended by a drain instead, continued cold from the stored Response; hot share %.1f%%; "+
		"live appends %d, %d hot; SIGKILL losses %d (%d of them just resumed from parked), replayed "+
		"cold; %d cut by a drain while sampling, replayed cold; %d refused while draining, sent again",
		f.rollouts.Load(), f.completed.Load(), f.parkEvents.Load(), f.parked.Load(), f.sameID.Load(),
		f.hot.Load(), f.coldContinued.Load(), f.hotShare(), f.liveSteps.Load(), f.liveHot.Load(),
		f.killed.Load(), f.parkedKilled.Load(), f.drainCut.Load(), f.refused.Load())
}

// reattachClient runs append-shape rollouts with the Go client through nginx until stop is
// closed, one Conn per rollout. Its tools take toolTime each, so that the restarts catch
// rollouts suspended.
type reattachClient struct {
	id       int
	url      string
	turns    int
	toolTime time.Duration
	n        *drillCounts
	f        *reattachFigures

	mu     sync.Mutex
	parked map[string][]int // Response id → sequence_numbers of the response.parked events seen
}

// toolCall is the exec_command tool of the drill, for the Go client.
var toolCall = client.FunctionTool("exec_command", "Run a shell command.", shell["parameters"])

// trace records the response.parked events the client's connections receive; the client
// does not pass them on (it detaches the rollout and reattaches on the next Append).
func (d *reattachClient) trace(sent bool, frame []byte) {
	if sent || !bytes.Contains(frame, []byte(`"response.parked"`)) {
		return
	}
	var ev struct {
		Type       string `json:"type"`
		ResponseID string `json:"response_id"`
		Seq        int    `json:"sequence_number"`
	}
	if json.Unmarshal(frame, &ev) != nil || ev.Type != "response.parked" {
		return
	}
	d.f.parkEvents.Add(1)
	d.mu.Lock()
	d.parked[ev.ResponseID] = append(d.parked[ev.ResponseID], ev.Seq)
	d.mu.Unlock()
}

// parkedBetween reports whether the Response id sent response.parked with a sequence_number
// after lo and before hi: between its suspension at lo and the end of the next step at hi
// (the next suspension may be parked before the client looks).
func (d *reattachClient) parkedBetween(id string, lo, hi int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.parked[id] {
		if s > lo && s < hi {
			return true
		}
	}
	return false
}

// run loops rollouts until stop is closed; ctx is the hard deadline.
func (d *reattachClient) run(ctx context.Context, stop <-chan struct{}) {
	d.parked = map[string][]int{}
	for r := 1; ; r++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		d.f.rollouts.Add(1)
		d.rollout(ctx, fmt.Sprintf("x-c%d-r%d", d.id, r))
	}
}

// transcript is what the client knows of a rollout: the items a cold replay sends, and the
// quote lines the sim's answer must hold.
type transcript struct {
	items []client.Item
	want  []string
}

// rollout runs one rollout to its verified answer. A rollout lost without a parked state
// (SIGKILL, or a drain that ended it while it sampled) is replayed cold: a new Response whose
// input is the whole transcript.
func (d *reattachClient) rollout(ctx context.Context, tag string) {
	user := fmt.Sprintf("[%s] drill: run %d checks", tag, d.turns)
	tr := &transcript{items: []client.Item{client.UserMessage(user)}, want: []string{quote("user", user)}}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || attempt > 30 {
			d.n.fail("%s: no answer after %d attempts", tag, attempt)
			return
		}
		done, err := d.attempt(ctx, tag, tr)
		if done {
			d.f.completed.Add(1)
			return
		}
		if err != nil {
			d.n.fail("%s: %v", tag, err)
			return
		}
	}
}

// backoff waits before a request is sent again (attempt from 0), or until ctx ends.
func backoff(ctx context.Context, attempt int) bool {
	select {
	case <-time.After(min(time.Duration(attempt+1)*20*time.Millisecond, 500*time.Millisecond)):
		return true
	case <-ctx.Done():
		return false
	}
}

// dial opens a Conn through nginx, trying again while no instance answers.
func (d *reattachClient) dial(ctx context.Context) (*client.Conn, error) {
	for try := 0; ; try++ {
		c, err := client.Dial(ctx, d.url, &client.Options{Trace: d.trace, DialTimeout: 10 * time.Second})
		if err == nil {
			if c.Shape() != client.ShapeAppend {
				_ = c.Close()
				return nil, fmt.Errorf("dial: shape %s, want append", c.Shape())
			}
			return c, nil
		}
		if try == 50 || !backoff(ctx, try) {
			return nil, fmt.Errorf("dial: %w", err)
		}
	}
}

// refusedByDrain reports whether err is a request refused because the instance drains.
func refusedByDrain(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && (e.Code == "server_shutting_down" || e.Code == "websocket_connection_limit_reached")
}

// attempt runs the rollout from tr on a new Conn. done: it ended with a verified answer; with
// done false and a nil error the rollout was lost and is replayed from tr.
func (d *reattachClient) attempt(ctx context.Context, tag string, tr *transcript) (done bool, err error) {
	c, err := d.dial(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	req := client.CreateRequest{Model: "sim", Input: tr.items, Tools: []client.Tool{toolCall},
		Metadata: map[string]string{"sim.calls": strconv.Itoa(d.turns)}}
	r, err := c.Start(ctx, req)
	if err != nil {
		return false, nil // the connection went away before the create: a new one
	}
	var (
		id              string // the current Response
		suspended       string // the Response of the last response.done
		seq             = -1   // sequence_number of that response.done
		prev            client.Usage
		lastIn, lastOut int  // the last step's input and output tokens
		appended        bool // the rollout has been suspended and appended to
	)
	for refusals := 0; ; {
		var last *client.Event
		var stepErr error
		for ev, err := range r.Events(ctx) {
			if err != nil {
				stepErr = err
				break
			}
			if ev.Type == "response.created" {
				if id != "" && ev.ResponseID != id {
					d.f.coldContinued.Add(1) // ended by the drain while suspended: a new Response
				}
				id = ev.ResponseID
			}
			last = &ev
		}
		switch {
		case stepErr != nil && refusedByDrain(stepErr) && !appended:
			d.f.refused.Add(1)
			return false, nil // the create was refused: nothing started, start it again
		case stepErr != nil && refusedByDrain(stepErr):
			// the append met the drain before the rollout was parked: the client
			// reattaches once the old connection says so
			d.f.refused.Add(1)
			if refusals++; refusals > 50 || !backoff(ctx, refusals) {
				return false, fmt.Errorf("append to %s refused %d times: %w", id, refusals, stepErr)
			}
			if err := d.appendPending(ctx, r, tr); err != nil {
				return d.lost(suspended, seq, err)
			}
			continue
		case stepErr != nil:
			return d.lost(suspended, seq, stepErr)
		case last == nil || (last.Suspended == nil && last.Final == nil):
			return false, fmt.Errorf("events of %s stopped without a suspension or an end", id)
		}
		refusals = 0
		var cum client.Usage
		switch {
		case last.Suspended != nil:
			cum = last.Suspended.Usage
		case last.Final.Usage != nil:
			cum = *last.Final.Usage
		}
		in := cum.InputTokens - prev.InputTokens
		cached := cum.InputTokensDetails.CachedTokens - prev.InputTokensDetails.CachedTokens
		if appended {
			// hot: the tokens held from before cover the whole previous context, its input
			// and what the model generated on it
			hot := cached >= lastIn+lastOut
			hi := last.SequenceNumber
			if last.ResponseID != suspended {
				hi = math.MaxInt // a new Response numbers from 0
			}
			switch {
			case d.parkedBetween(suspended, seq, hi):
				d.f.parked.Add(1)
				if last.ResponseID == suspended {
					d.f.sameID.Add(1)
				} else {
					d.n.fail("%s: parked %s resumed as %s", tag, suspended, last.ResponseID)
				}
				if hot {
					d.f.hot.Add(1)
				}
			case last.ResponseID == suspended:
				d.f.liveSteps.Add(1)
				if hot {
					d.f.liveHot.Add(1)
				}
			}
		}
		lastIn, lastOut = in, cum.OutputTokens-prev.OutputTokens
		prev, seq, suspended = cum, last.SequenceNumber, id
		if last.Final != nil {
			return d.end(tag, last.Final, tr)
		}
		// the tools run, as an agent's would; the restarts catch the rollout here
		select {
		case <-time.After(d.toolTime):
		case <-ctx.Done():
			return false, ctx.Err()
		}
		tr.items = append(tr.items, last.Suspended.Output...)
		for _, call := range last.Suspended.Calls {
			out := fmt.Sprintf("[%s] %s", tag, call.CallID[max(0, len(call.CallID)-16):])
			tr.items = append(tr.items, call.Output(out))
			tr.want = append(tr.want, quote("tool", out))
		}
		appended = true
		if err := d.appendPending(ctx, r, tr); err != nil {
			return d.lost(suspended, seq, err)
		}
	}
}

// appendPending appends the outputs at the end of tr: those of the last suspension.
func (d *reattachClient) appendPending(ctx context.Context, r *client.Rollout, tr *transcript) error {
	s := r.Suspension()
	if s == nil {
		return client.ErrEnded
	}
	return r.Append(ctx, tr.items[len(tr.items)-len(s.Calls):]...)
}

// lost counts a rollout that ended without its answer; the caller replays it cold.
func (d *reattachClient) lost(id string, seq int, err error) (bool, error) {
	if !errors.Is(err, client.ErrConnectionLost) && !errors.Is(err, client.ErrEnded) {
		d.mu.Lock()
		parks := d.parked[id]
		d.mu.Unlock()
		return false, fmt.Errorf("rollout %s (last suspended at #%d, parked at %v): %w", id, seq, parks, err)
	}
	d.f.killed.Add(1)
	if d.parkedBetween(id, seq, math.MaxInt) {
		d.f.parkedKilled.Add(1)
	}
	return false, nil
}

// end checks the final Response: completed with the sim's answer quoting tr, or cut by a
// drain (the caller replays it).
func (d *reattachClient) end(tag string, final *client.Response, tr *transcript) (bool, error) {
	if final.Status != "completed" {
		if final.Status == "incomplete" && final.IncompleteDetails != nil && final.IncompleteDetails.Reason == "server_shutdown" {
			d.f.drainCut.Add(1)
			return false, nil
		}
		return false, fmt.Errorf("%s ended %s %+v", final.ID, final.Status, final.IncompleteDetails)
	}
	for _, it := range final.Output {
		if it.Type == "message" {
			var msg drillItem
			if err := json.Unmarshal(it.Raw, &msg); err != nil {
				return false, fmt.Errorf("answer of %s: %w", final.ID, err)
			}
			(&drillClient{n: d.n}).verify(tag, msg, tr.want)
			return true, nil
		}
	}
	return false, fmt.Errorf("%s completed without an answer", final.ID)
}
