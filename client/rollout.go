package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"sync"
	"time"
)

// state is where a rollout is, as the client sees it.
type state int

const (
	stQueued    state = iota // a create was sent; no response.created yet
	stSampling               // holds the sampling slot, or waits for it after an append
	stSuspended              // waits for Append on its WebSocket
	stDetached               // suspended, but its WebSocket went away: Append continues on a new one
	stEnded
)

// result is one item of a rollout's event queue.
type result struct {
	ev  Event
	err error
}

// Rollout is one agent rollout: one Response in the append shape, a chain of Responses linked
// by previous_response_id in the public shape. Its methods may be called from several
// goroutines. Events is meant for one reader at a time: several share the events between
// them, each event going to one of them, and each stops at the suspension or the end.
type Rollout struct {
	// Immutable
	c          *Conn
	settings   map[string]json.RawMessage // the create's members but input and previous_response_id
	store      bool                       // the Responses are stored (store is not false)
	replayable bool                       // the create named no previous_response_id
	lane       string                     // stream_id: "" for the default lane

	// notify holds a token when the readers of Events should look at the queue and the state
	// again (push, signal); one slot, never closed.
	notify chan struct{}

	mu         sync.Mutex // guards the fields below
	link       *link
	state      state
	id         string   // the current Response id ("" until response.created)
	queue      []result // queue[head:] is what Events has not read yet (pop)
	head       int
	susp       *Suspension
	history    []json.RawMessage // the rollout's context, for a replay
	cur        []Item            // append shape: the current Response's output up to its last suspension
	cancelling bool              // a response.cancel was sent; the terminal event is due
	ended      bool              // r.id names a Response that has ended on the server (stored if store)
	parked     bool              // detached by response.parked: an append on a new WebSocket resumes r.id
	prior      []Item            // the output of the rollout's ended Responses (segments)
	priorUsage Usage             // their usage
	usage      Usage             // the current Response's usage
	final      *Response
}

// Start sends response.create for req and returns the rollout at once; its first event
// (response.created) comes when the rollout gets the connection's sampling slot. A create the
// server rejects ends the rollout: Events returns the *Error. Start itself returns ErrClosed
// after Close, ErrConnectionLost when the WebSocket has ended and is not redialed, the error
// of a redial (a *Error when the upgrade was refused), ctx's error when it ended before the
// frame was written (nothing was sent), or the error of the write (the connection then ends,
// package doc, Contexts).
func (c *Conn) Start(ctx context.Context, req CreateRequest) (*Rollout, error) {
	settings, err := req.settings()
	if err != nil {
		return nil, fmt.Errorf("client: encode create: %w", err)
	}
	r := &Rollout{c: c, settings: settings, store: req.Store == nil || *req.Store,
		replayable: req.PreviousResponseID == "", lane: req.lane(), notify: make(chan struct{}, 1)}
	members := maps.Clone(settings)
	if len(req.Input) > 0 {
		if members["input"], err = json.Marshal(req.Input); err != nil {
			return nil, fmt.Errorf("client: encode input: %w", err)
		}
		for _, it := range req.Input {
			b, _ := json.Marshal(it)
			r.history = append(r.history, b)
		}
	}
	if req.PreviousResponseID != "" {
		members["previous_response_id"], _ = json.Marshal(req.PreviousResponseID)
	}
	f, err := frame("response.create", members)
	if err != nil {
		return nil, fmt.Errorf("client: encode create: %w", err)
	}
	q := &request{kind: reqCreate, r: r,
		apply: func(l *link) ([]byte, error) { r.link, r.state = l, stQueued; return f, nil },
		undo:  func() { r.state = stEnded }}
	if err := c.sendRetry(ctx, q); err != nil {
		if errors.Is(err, errLinkGone) {
			err = ErrConnectionLost
		}
		return nil, err
	}
	return r, nil
}

// sendRetry sends q on the current WebSocket, and once more on a new one if it went away.
func (c *Conn) sendRetry(ctx context.Context, q *request) error {
	for try := 0; ; try++ {
		l, err := c.current(ctx)
		if err == nil {
			err = l.send(ctx, q)
		}
		if err != nil && c.closed.Load() && !errors.Is(err, ErrClosed) {
			return fmt.Errorf("%w: %w", ErrClosed, err) // Close ran meanwhile
		}
		if !errors.Is(err, errLinkGone) || try == 1 {
			return err
		}
	}
}

// ID is the rollout's current Response id: "" until response.created; in the public shape and
// after a reconnect, the id of the latest Response of the chain.
func (r *Rollout) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id
}

// Suspension returns the pending tool calls while the rollout waits for Append, else nil (also
// after Conn.Close).
func (r *Rollout) Suspension() *Suspension {
	r.mu.Lock()
	defer r.mu.Unlock()
	if (r.state != stSuspended && r.state != stDetached) || r.cancelling || r.c.closed.Load() {
		return nil
	}
	return r.susp
}

// Response returns the final Response once the rollout has ended (nil before, and after an
// error that ended it). In the public shape and after reconnects it is merged over the chain:
// Output holds every model item of the rollout, Usage the sum.
func (r *Rollout) Response() *Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.final
}

// Usage is the rollout's usage so far, summed over the Responses of its chain.
func (r *Rollout) Usage() Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.priorUsage.Add(r.usage)
}

// Events iterates the rollout's events up to and including the next suspension
// ([Event.Suspended]) or its end ([Event.Final]). It stops after an error: a *Error for a
// frame the server rejected (a rejected append or cancel leaves the rollout as it was; call
// Append or Events again), ErrConnectionLost, ErrClosed (once, for a rollout that had not
// ended at Conn.Close), or ctx's error. An append to a parked
// rollout refused for now is sent again from here (package doc, Reattaching), unless
// Conn.Close has run: then nothing is sent, and ErrClosed ends the rollout. While the rollout is
// suspended or ended and no event is left, the iteration is empty.
func (r *Rollout) Events(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			res, ok := r.next(ctx)
			if !ok {
				return
			}
			if !yield(res.ev, res.err) || res.err != nil || res.ev.Suspended != nil || res.ev.Final != nil {
				return
			}
		}
	}
}

// next waits for the next queued result; false when the rollout waits for nothing. A reader
// passes the token of notify on when it leaves something for another reader to see: a result
// still queued, or a state in which the rollout waits for nothing.
func (r *Rollout) next(ctx context.Context) (result, bool) {
	for {
		r.mu.Lock()
		res, ok := r.pop()
		if !ok && r.state == stDetached && r.c.closed.Load() {
			// Suspended on a WebSocket that went away before Close: nothing can continue it.
			r.endClosedLocked()
			res, ok = result{err: ErrClosed}, true
		}
		idle := r.idle()
		if (ok && r.head < len(r.queue)) || idle {
			r.signal()
		}
		r.mu.Unlock()
		if ok {
			if rt, isRetry := res.err.(*retry); isRetry {
				if err := r.resend(ctx, rt); err != nil {
					if errors.Is(err, ErrClosed) {
						r.endClosed()
					}
					return result{err: err}, true
				}
				continue
			}
			return res, true
		}
		if idle {
			return result{}, false
		}
		select {
		case <-r.notify:
		case <-ctx.Done():
			return result{err: ctx.Err()}, true
		}
	}
}

// Append sends the outputs of the pending calls (Call.Output), optionally followed by
// messages (UserMessage). In the append shape it is response.append; in the public shape a
// response.create with previous_response_id; after a reconnect a create on the new WebSocket
// (see the package doc). The server's verdict comes through Events. Append returns
// ErrNotSuspended or ErrEnded when the rollout does not wait for outputs, and ErrClosed after
// Conn.Close.
func (r *Rollout) Append(ctx context.Context, items ...Item) error {
	input, err := json.Marshal(items)
	if err != nil {
		return fmt.Errorf("client: encode input: %w", err)
	}
	raws := make([]json.RawMessage, len(items))
	for i, it := range items {
		raws[i], _ = json.Marshal(it)
	}
	if r.c.closed.Load() {
		return ErrClosed
	}
	r.mu.Lock()
	err = r.appendable()
	r.mu.Unlock()
	if err != nil {
		return err // before any dial
	}
	var ids []string
	for _, it := range items {
		if it.CallID != "" {
			ids = append(ids, it.CallID)
		}
	}
	var build func() *request
	build = func() *request {
		q := &request{r: r, ids: ids, again: build}
		q.apply = func(l *link) ([]byte, error) { return r.applyAppend(l, q, input, raws) }
		return q
	}
	q := build()
	err = r.sendAppend(ctx, q)
	for refusedForNow(err) && r.reattaching() {
		// The dial of a new WebSocket for the reattach met an instance that drains, or a
		// gateway with no instance to give it yet.
		if q.tries == reattachTries {
			return err
		}
		tries := q.tries + 1
		if werr := sleep(ctx, reattachBackoff(tries)); werr != nil {
			return werr
		}
		q = build()
		q.tries = tries
		err = r.sendAppend(ctx, q)
	}
	return err
}

// sendAppend sends the append q. When the write fails because the WebSocket went away, and
// the rollout is parked (a reattach, or response.parked came before the end), the reader's
// exit has queued the append again for Events: sendAppend waits for that exit and returns nil.
func (r *Rollout) sendAppend(ctx context.Context, q *request) error {
	err := r.send(ctx, q)
	if !errors.Is(err, errWrite) || q.on == nil {
		return err
	}
	select {
	case <-q.on.done:
	case <-ctx.Done():
		return err
	}
	if q.reattach || r.reattaching() {
		return nil
	}
	return err
}

// reattachTries bounds the retries of an append to a parked rollout refused for now
// (refusedForNow); reattachBackoff(n) is the wait before the nth: 50 ms doubling up to 2 s,
// about 11 s in all.
const reattachTries = 10

func reattachBackoff(n int) time.Duration {
	return min(50*time.Millisecond<<min(n-1, 6), 2*time.Second)
}

// sleep waits d or until ctx ends (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refusedForNow reports whether err refuses an append to a parked rollout for a while only:
// server_shutting_down (the instance drains; the rollout waits in the store), or the upgrade
// of its new WebSocket refused with 502, 503 or 504 (a gateway in front of instances that
// restart).
func refusedForNow(err error) bool {
	e, ok := AsError(err)
	return ok && (e.Code == "server_shutting_down" || e.Status == http.StatusBadGateway ||
		e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout)
}

// reattaching reports whether the rollout is parked and detached: its next append reattaches.
func (r *Rollout) reattaching() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parked && r.state == stDetached && !r.cancelling
}

// retry is the error queued for Events when an append to a parked rollout was refused by an
// instance that shuts down, or never answered before its WebSocket went away: Events sends
// the append again (again) on a new WebSocket.
type retry struct {
	err   error
	again *request
}

func (e *retry) Error() string { return e.err.Error() }
func (e *retry) Unwrap() error { return e.err }

// resend sends the append of rt again after a backoff, while the rollout is still parked and
// detached (another Append may have resumed it meanwhile), at most reattachTries times in
// all; it returns the last refusal after that, ctx's error, or ErrClosed once Conn.Close has
// run (nothing is sent then; the caller ends the rollout, endClosed).
func (r *Rollout) resend(ctx context.Context, rt *retry) error {
	q, cause := rt.again, rt.err
	for r.reattaching() {
		if r.c.closed.Load() {
			return ErrClosed
		}
		if q.tries == reattachTries {
			return cause
		}
		tries := q.tries + 1
		if err := sleep(ctx, reattachBackoff(tries)); err != nil {
			return err
		}
		if !r.reattaching() {
			return nil
		}
		q = q.again()
		q.tries = tries
		err := r.sendAppend(ctx, q)
		if !refusedForNow(err) {
			return err
		}
		cause = err
	}
	return nil
}

// endClosed ends the rollout after Conn.Close when it is still detached (resend found the
// Conn closed): Events has returned ErrClosed for it, once.
func (r *Rollout) endClosed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == stDetached {
		r.endClosedLocked()
	}
}

// endClosedLocked ends the detached rollout after Conn.Close: nothing can continue it. r.mu is
// held.
func (r *Rollout) endClosedLocked() {
	r.state, r.susp = stEnded, nil
}

// send sends q for the rollout. When the rollout's WebSocket is going away but its reader has
// not yet detached the rollout, send waits for that, and tries once more.
func (r *Rollout) send(ctx context.Context, q *request) error {
	err := r.c.sendRetry(ctx, q)
	if !errors.Is(err, errLinkGone) {
		return err
	}
	r.mu.Lock()
	old := r.link
	r.mu.Unlock()
	select {
	case <-old.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := r.c.sendRetry(ctx, q); !errors.Is(err, errLinkGone) {
		return err
	}
	return ErrConnectionLost
}

// appendable reports why the rollout cannot take an append now, or nil. r.mu is held.
func (r *Rollout) appendable() error {
	switch {
	case r.state == stEnded:
		return ErrEnded
	case (r.state != stSuspended && r.state != stDetached) || r.cancelling:
		return ErrNotSuspended
	}
	return nil
}

// applyAppend builds the frame that continues the rollout on l and moves it to the queue.
func (r *Rollout) applyAppend(l *link, q *request, input []byte, items []json.RawMessage) ([]byte, error) {
	if err := r.appendable(); err != nil {
		return nil, err
	}
	if r.state == stSuspended && r.link != l {
		return nil, errLinkGone // its WebSocket is going away: wait until the reader detached it
	}
	prevState, prevLink, n := r.state, r.link, len(r.history)
	q.undo = func() { r.state, r.link, r.history = prevState, prevLink, r.history[:n] }
	members := maps.Clone(r.settings)
	if r.parked && r.state == stDetached && l.shape == ShapeAppend {
		// Reattach: the server that shut down parked the rollout to its shared store; an
		// append naming it on this WebSocket resumes it, same Response, numbering going on.
		// l.mu is held: the reader routes its events here from now on.
		q.kind, q.reattach, r.state, r.link, r.parked = reqAppend, true, stSampling, l, false
		l.byID[r.id] = r
		q.undo = func() {
			r.state, r.link, r.history, r.parked = prevState, prevLink, r.history[:n], true
			delete(l.byID, r.id)
		}
		members = map[string]json.RawMessage{"input": input}
		members["response_id"], _ = json.Marshal(r.id)
		r.history = append(r.history, items...)
		return frame("response.append", members)
	}
	switch {
	case r.link == l && l.shape == ShapeAppend:
		q.kind, r.state = reqAppend, stSampling
		members = map[string]json.RawMessage{"input": input}
		members["response_id"], _ = json.Marshal(r.id)
		r.history = append(r.history, items...)
		return frame("response.append", members)
	case r.link == l || (r.store && r.ended):
		members["previous_response_id"], _ = json.Marshal(r.id)
		members["input"] = input
	case r.replayable:
		all := append(append([]json.RawMessage(nil), r.history...), items...)
		members["input"], _ = json.Marshal(all)
	default:
		return nil, ErrCannotContinue
	}
	q.kind, r.state, r.link = reqCreate, stQueued, l
	r.history = append(r.history, items...)
	return frame("response.create", members)
}

// Cancel ends the rollout (append shape: response.cancel; the terminal response.incomplete
// with reason "cancelled" comes through Events). A suspended public-shape rollout, or one whose
// WebSocket went away, ends on the client at once, with a synthesized response.incomplete.
// Cancel returns ErrNotStarted while the create is queued, ErrEnded after the end,
// ErrCancelUnsupported for a sampling public-shape rollout, and ErrClosed after Conn.Close.
func (r *Rollout) Cancel(ctx context.Context) error {
	if r.c.closed.Load() {
		return ErrClosed
	}
	r.mu.Lock()
	if r.state == stEnded {
		r.mu.Unlock()
		return ErrEnded
	}
	if r.state == stDetached || (r.state == stSuspended && r.link.shape == ShapePublic) {
		r.endLocally("cancelled")
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	q := &request{kind: reqCancel, r: r, undo: func() { r.cancelling = false }}
	q.apply = func(l *link) ([]byte, error) {
		switch {
		case r.state == stEnded:
			return nil, ErrEnded
		case r.state == stQueued:
			return nil, ErrNotStarted
		case r.link != l:
			return nil, errLinkGone
		case l.shape == ShapePublic:
			return nil, ErrCancelUnsupported
		}
		r.cancelling = true
		id, _ := json.Marshal(r.id)
		return frame("response.cancel", map[string]json.RawMessage{"response_id": id})
	}
	err := r.send(ctx, q)
	if errors.Is(err, ErrConnectionLost) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.state == stDetached { // the WebSocket went away meanwhile
			r.endLocally("cancelled")
			return nil
		}
	}
	return err
}
