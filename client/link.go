package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// endedKeep is how many ended rollouts a link remembers, so that the error answering a
// request that a rollout's end overtook (a second response.cancel is answered
// response_already_completed right after the terminal event) is not given to another
// rollout's request.
const endedKeep = 256

// errLinkGone is returned by link.send when the WebSocket ended before the request was sent;
// nothing was changed and the caller retries on a new WebSocket.
var errLinkGone = errors.New("client: websocket gone")

// errWrite wraps the error of a request frame's write: the WebSocket has ended, and its
// reader's exit answers the rollouts that were on it.
var errWrite = errors.New("client: write")

// reqKind is what a request frame asks for.
type reqKind int

const (
	reqCreate reqKind = iota // response.create: answered by response.created or an error
	reqAppend                // response.append: answered by the rollout's next output event or an error
	reqCancel                // response.cancel: answered by the terminal event or an error
)

// request is a frame the server has not answered yet.
type request struct {
	kind reqKind
	r    *Rollout
	ids  []string // the call_ids of its input: an error message naming one answers this request
	// reattach: an append that resumes a parked rollout on a new WebSocket (applyAppend).
	reattach bool
	// again returns the same append as a new request, for a retry (appends only).
	again func() *request
	tries int   // the retries before this request (reattachTries bounds them)
	on    *link // the WebSocket it was written on (set by link.send)
	// apply checks the rollout's state, changes it as if the server accepted the frame, and
	// returns the frame. It runs with link.mu and r.mu held.
	apply func(l *link) ([]byte, error)
	// undo reverts apply when the server rejects the frame. It runs with r.mu held.
	undo func()
}

// link is one WebSocket of a Conn: its reader goroutine routes server events to rollouts.
type link struct {
	// Immutable
	ws        *websocket.Conn
	shape     Shape
	reconnect bool
	trace     func(sent bool, frame []byte) // Options.Trace, or nil
	done      chan struct{}                 // closed when the reader has exited
	// raw is the connection's byte stream (the body of the 101). Closing it ends the reader
	// and cuts short a close handshake and writes in progress, where the library's CloseNow
	// would wait for a handshake under way.
	raw       io.Closer
	closeOnce sync.Once
	shut      chan struct{} // closed when the close handshake started by closeOnce has returned

	wsem chan struct{} // a one-slot semaphore held while registering and writing a request, so
	// that pending is in wire order; a channel, so that a waiting sender honours its ctx

	mu      sync.Mutex // guards the fields below
	byID    map[string]*Rollout
	all     map[*Rollout]struct{} // rollouts that sent a frame on this link
	pending []*request            // requests not answered yet, in wire order
	holders map[string]*Rollout   // the rollout holding the sampling slot of each lane ("": the default lane)
	ended   []string              // the ids of the last endedKeep rollouts that ended here, oldest first
	err     error                 // why the reader exited; nil while it runs
	away    bool                  // the server announced the age limit or closed with 1001
	closing bool                  // Conn.Close closes this link
}

func newLink(ws *websocket.Conn, raw io.Closer, shape Shape, reconnect bool, trace func(bool, []byte)) *link {
	return &link{ws: ws, raw: raw, shape: shape, reconnect: reconnect, trace: trace, done: make(chan struct{}),
		shut: make(chan struct{}),
		wsem: make(chan struct{}, 1),
		byID: map[string]*Rollout{}, all: map[*Rollout]struct{}{}, holders: map[string]*Rollout{}}
}

// close closes the link for Conn.Close. With handshake it sends the close frame (status 1000)
// and waits for the server's (the reader sees it and exits), until ctx ends: then, and
// without handshake, it closes the connection at once. It returns when the reader has exited:
// ctx's error when it ended first, else nil.
func (l *link) close(ctx context.Context, handshake bool) error {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	if !handshake {
		_ = l.raw.Close()
		<-l.done
		return nil
	}
	l.closeOnce.Do(func() {
		go func() {
			defer close(l.shut)
			// The library's own bounds are 5 s for the write and 5 s for the answer; closing
			// raw cuts both short.
			_ = l.ws.Close(websocket.StatusNormalClosure, "")
		}()
	})
	var err error
	select {
	case <-l.shut:
	case <-ctx.Done():
		err = ctx.Err()
		_ = l.raw.Close()
		<-l.shut
	}
	<-l.done
	return err
}

// status reports whether the link can no longer take requests, and why.
func (l *link) status() (gone bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err != nil || l.away, l.err
}

// exited reports whether the link's reader has exited.
func (l *link) exited() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// goingAway reports whether the server ended the link in a way that allows a reconnect.
func (l *link) goingAway() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.away && !l.closing
}

// send applies q and writes its frame. It returns errLinkGone, with nothing changed, when the
// link has ended, and ctx's error, with nothing changed, when ctx ends before the frame is
// registered. Once registered, the frame is in pending, which must match the wire: a write
// error (ctx ending while the frame is written, or a broken socket) ends the link, and the
// reader's exit ends the requests and rollouts on it.
func (l *link) send(ctx context.Context, q *request) error {
	select {
	case l.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-l.wsem }()
	if err := ctx.Err(); err != nil {
		// The select picks at random when both are ready: a ctx that has already ended must
		// not reach Write, which would end the WebSocket of every rollout on it.
		return err
	}
	l.mu.Lock()
	if l.err != nil || l.away {
		l.mu.Unlock()
		return errLinkGone
	}
	q.r.mu.Lock()
	frame, err := q.apply(l)
	q.r.mu.Unlock()
	if err != nil {
		l.mu.Unlock()
		return err
	}
	q.on = l
	l.pending = append(l.pending, q)
	l.all[q.r] = struct{}{}
	l.mu.Unlock()
	if l.trace != nil {
		l.trace(true, frame)
	}
	if err := l.ws.Write(ctx, websocket.MessageText, frame); err != nil {
		// The frame may be unsent (the library's lock was not taken) or cut: either way the
		// server will not answer it, and a request left in pending would take the answer of
		// the next one.
		_ = l.ws.CloseNow()
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// read owns the link's reads until the WebSocket ends.
func (l *link) read() {
	defer close(l.done)
	for {
		typ, data, err := l.ws.Read(context.Background())
		if err != nil {
			l.exit(err)
			return
		}
		if typ != websocket.MessageText {
			continue
		}
		if l.trace != nil {
			l.trace(false, data)
		}
		l.mu.Lock()
		l.handle(data)
		l.mu.Unlock()
	}
}

// exit ends or detaches the rollouts of the link after its reader ended with err.
func (l *link) exit(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := websocket.CloseStatus(err); st == websocket.StatusGoingAway || st == websocket.StatusServiceRestart {
		l.away = true
	}
	l.err = err
	cause := fmt.Errorf("%w: %w", ErrConnectionLost, err)
	if l.closing {
		cause = ErrClosed
	}
	if l.away && l.reconnect && !l.closing {
		// An append to a parked rollout that the server never answered before it went away:
		// the rollout is still in the store, and the append goes to a new WebSocket.
		for _, q := range l.pending {
			q.r.mu.Lock()
			if q.kind == reqAppend && q.r.link == l && (q.reattach || q.r.parked) {
				q.undo()
				q.r.detachParked(l)
				q.r.push(Event{}, &retry{err: cause, again: q})
			}
			q.r.mu.Unlock()
		}
	}
	for r := range l.all {
		r.mu.Lock()
		if r.link == l {
			r.linkEnded(l.away && l.reconnect && !l.closing, cause)
		}
		r.mu.Unlock()
	}
	l.all, l.pending, l.holders = nil, nil, nil
}

// handle routes one server event; raw is not reused by the reader (ws.Read returns a new
// slice), so events keep it. l.mu is held.
func (l *link) handle(raw []byte) {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		return // not an event of this protocol; nothing to route it to
	}
	switch {
	case w.Type == "error":
		l.onError(w.apiError(), w.StreamID)
	case w.Type == "response.created" && w.Response != nil:
		l.onCreated(&w, raw)
	case w.Type == "response.done":
		l.onSuspended(&w, raw)
	case w.Type == "response.parked":
		l.onParked(w.ResponseID)
	case w.Response != nil:
		l.onLifecycle(&w, raw)
	default:
		l.onOutput(&w, raw)
	}
}

func (l *link) onError(e *Error, lane string) {
	if e.Code == "websocket_connection_limit_reached" {
		l.away = true
	}
	i := l.match(e, lane)
	if i < 0 {
		return
	}
	q := l.pending[i]
	l.pending = append(l.pending[:i], l.pending[i+1:]...)
	r := q.r
	r.mu.Lock()
	defer r.mu.Unlock()
	q.undo()
	if q.kind == reqAppend && r.parked {
		r.detachParked(l) // response.parked crossed this append: the rollout waits in the store
	}
	switch {
	case q.kind == reqAppend && r.parked && e.Code == "server_shutting_down":
		// The instance that answered drains: the append goes to a new WebSocket (Events
		// sends it again after a backoff).
		l.away = true
		r.push(Event{}, &retry{err: e, again: q})
	case q.reattach && e.Code == "response_not_found":
		// Nothing parked under the Response (expired, or resumed elsewhere): it cannot go
		// on, and the refusal is its end.
		delete(l.byID, r.id)
		r.state, r.susp, r.parked = stEnded, nil, false
		r.push(Event{}, e)
	default:
		r.push(Event{}, e)
	}
}

// match returns the pending request an error answers: the one whose response id, pending
// call_id or input call_id the message names, else the oldest (append-protocol.md, Known
// limitations); -1 if none is pending, or when an error about a response_id names a rollout
// that has ended on this link (the error answers one of its requests, which its end
// overtook). An error
// that names a lane (its stream_id) answers a request of that lane only; one without may
// answer any (the default lane's errors and those of no lane, such as invalid_stream_id,
// carry none), and one about a response_id or a previous_response_id only a request that has
// one (mayAnswer).
func (l *link) match(e *Error, lane string) int {
	oldest := -1
	for i, q := range l.pending {
		if lane != "" && q.r.lane != lane || !q.mayAnswer(e) {
			continue
		}
		if oldest < 0 {
			oldest = i
		}
		q.r.mu.Lock()
		named := q.r.named(e.Message)
		q.r.mu.Unlock()
		for _, id := range q.ids {
			named = named || mentions(e.Message, id)
		}
		if named {
			return i
		}
	}
	if oldest >= 0 && aboutResponseID(e) && slices.ContainsFunc(l.ended, func(id string) bool { return mentions(e.Message, id) }) {
		return -1
	}
	return oldest
}

// aboutResponseID reports an error about the response_id of an append or a cancel: only such
// an error can answer a request of a rollout that has ended (a create's error may name an
// ended rollout as its previous_response_id, and answers that create).
func aboutResponseID(e *Error) bool {
	switch e.Code {
	case "response_not_found", "response_not_suspended", "response_already_completed":
		return true
	}
	return false
}

// mayAnswer reports whether e can be the answer to q: the errors about the response_id of an
// append or a cancel answer no create, those about a create's previous_response_id no append
// or cancel.
func (q *request) mayAnswer(e *Error) bool {
	switch e.Code {
	case "response_not_found", "response_not_suspended", "response_already_completed":
		return q.kind != reqCreate
	case "previous_response_not_found", "response_in_progress":
		return q.kind == reqCreate
	}
	return true
}

// remember records that rollout id has ended on this link (l.mu is held).
func (l *link) remember(id string) {
	if len(l.ended) == endedKeep {
		l.ended = append(l.ended[:0], l.ended[1:]...)
	}
	l.ended = append(l.ended, id)
}

func (l *link) onCreated(w *wireEvent, raw []byte) {
	i := l.firstInLane(reqCreate, w.StreamID)
	if i < 0 {
		return
	}
	q := l.pending[i]
	l.pending = append(l.pending[:i], l.pending[i+1:]...)
	r := q.r
	l.holders[r.lane] = r
	r.mu.Lock()
	delete(l.byID, r.id)
	r.created(w.Response.ID)
	r.push(w.event(raw), nil)
	r.mu.Unlock()
	l.byID[w.Response.ID] = r
}

func (l *link) onSuspended(w *wireEvent, raw []byte) {
	r := l.byID[w.ResponseID]
	if r == nil {
		return
	}
	if l.holders[r.lane] == r {
		delete(l.holders, r.lane)
	}
	r.mu.Lock()
	if r.link == l {
		r.suspended(w.event(raw), w.PendingCallIDs, w.Output, w.Usage)
	}
	r.mu.Unlock()
}

// onParked handles response.parked: the server parked the suspended rollout id to its shared
// store as it shut down. The rollout detaches from this WebSocket, which takes no more
// requests, and its next Append resumes it on a new one with response.append (reattach).
func (l *link) onParked(id string) {
	r := l.byID[id]
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.link == l && !r.cancelling {
		switch r.state {
		case stSuspended:
			r.parked = true
			r.detachParked(l)
			l.away = true // the server drains this WebSocket: the next request goes to a new one
			return
		case stSampling:
			// An append crossed the event: the server refuses it (shutting down), or goes
			// away without an answer; either detaches the rollout (onError, exit).
			r.parked = true
			l.away = true
			return
		}
	}
	delete(l.byID, id)
	delete(l.all, r)
}

func (l *link) onLifecycle(w *wireEvent, raw []byte) {
	r := l.byID[w.Response.ID]
	if r == nil {
		return
	}
	if !isTerminal(w.Type) {
		r.mu.Lock()
		if r.link == l {
			r.push(w.event(raw), nil)
		}
		r.mu.Unlock()
		return
	}
	if l.holders[r.lane] == r {
		delete(l.holders, r.lane)
	}
	for i := l.firstPending(-1, r); i >= 0; i = l.firstPending(-1, r) {
		l.pending = append(l.pending[:i], l.pending[i+1:]...)
	}
	r.mu.Lock()
	ended := true // a rollout that moved to another WebSocket is done with this one
	if r.link == l {
		ended = r.terminal(l, w.event(raw))
	}
	r.mu.Unlock()
	if ended {
		delete(l.byID, w.Response.ID)
		delete(l.all, r)
		l.remember(w.Response.ID)
	}
}

// onOutput routes an output event, which carries no response id, to the rollout holding the
// sampling slot of its lane: the one whose response.created came last, or, after a
// suspension, the one whose append was sent first.
func (l *link) onOutput(w *wireEvent, raw []byte) {
	r := l.holders[w.StreamID]
	if r == nil {
		i := l.firstInLane(reqAppend, w.StreamID)
		if i < 0 {
			return
		}
		r = l.pending[i].r
		l.holders[w.StreamID] = r
		l.pending = append(l.pending[:i], l.pending[i+1:]...)
	}
	r.mu.Lock()
	r.push(w.event(raw), nil)
	r.mu.Unlock()
}

// firstPending returns the index of the oldest pending request of kind (any kind when kind is
// -1) and of rollout r (any rollout when r is nil), or -1.
func (l *link) firstPending(kind reqKind, r *Rollout) int {
	for i, q := range l.pending {
		if (kind < 0 || q.kind == kind) && (r == nil || q.r == r) {
			return i
		}
	}
	return -1
}

// firstInLane returns the index of the oldest pending request of kind of a rollout in lane,
// or -1: within a lane the server answers in the order the requests were sent.
func (l *link) firstInLane(kind reqKind, lane string) int {
	for i, q := range l.pending {
		if q.kind == kind && q.r.lane == lane {
			return i
		}
	}
	return -1
}

// frame marshals a client event: members plus "type".
func frame(typ string, members map[string]json.RawMessage) ([]byte, error) {
	m := make(map[string]json.RawMessage, len(members)+1)
	for k, v := range members {
		m[k] = v
	}
	t, _ := json.Marshal(typ)
	m["type"] = t
	return json.Marshal(m)
}

// mentions reports whether msg names id as a whole word.
func mentions(msg, id string) bool {
	if id == "" {
		return false
	}
	for i := strings.Index(msg, id); i >= 0; {
		end := i + len(id)
		if end == len(msg) || !isIDChar(msg[end]) {
			return true
		}
		j := strings.Index(msg[end:], id)
		if j < 0 {
			return false
		}
		i = end + j
	}
	return false
}

func isIDChar(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
