package compat

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// Defaults of [Background].
const (
	// DefaultBackgroundEventBytes is the default bound of the encoded events kept per
	// background response: 4 MiB.
	DefaultBackgroundEventBytes = 4 << 20
	// DefaultBackgroundKeep is how long the events of a finished background response stay by
	// default after its terminal event: 10 minutes.
	DefaultBackgroundKeep = 10 * time.Minute
	// DefaultBackgroundSync is how often by default a running background response's record
	// and new events are written to a shared store (Background.Shared), and how often it
	// looks there for a cancel request: 250 ms.
	DefaultBackgroundSync = 250 * time.Millisecond
)

// bgEventOverhead is what Background counts in the Budget per kept event besides its
// encoding (the slice entry and the event type).
const bgEventOverhead = 64

// Background keeps the background responses (background:true over HTTP) of one server. Each
// runs on its own connection core, detached from the request that created it: the client may
// go, the response runs on. Its events are kept — the newest MaxEventBytes of them, counted in
// the Budget — so that a client can follow them or resume after any sequence_number
// (GET /v1/responses/{id}?stream=true&starting_after=N) while it runs and for Keep after its
// terminal event; its terminal Response is in the store (background requires store:true).
// The zero value works; call Close when the server has drained.
type Background struct {
	// MaxEventBytes bounds the encoded events kept per response, in bytes: over it the oldest
	// are dropped, and a resume from before the first kept one is answered
	// response_events_expired. 0 means DefaultBackgroundEventBytes.
	MaxEventBytes int64
	// Keep is how long the events of a finished response stay after its terminal event. 0
	// means DefaultBackgroundKeep.
	Keep time.Duration
	// Shared, if set, is the store the deployment's instances share (bgshared.go): each
	// background response's record (its Response: queued, in_progress, then terminal) and
	// its kept events (same bound) are written to it when it is created, every Sync while
	// it runs, and at its end, so that GET, the event stream and cancel work on any
	// instance; a cancel request left there by another instance is acted on at the next
	// Sync. nil: everything stays in this instance's memory.
	Shared session.BackgroundKeeper
	// Sync is how often the running responses are written to Shared, all of them in one call
	// (one round trip), and asked for a cancel request there, and how often an instance that
	// does not run a response polls it. A running response with nothing new is only asked for a
	// cancel request, and written again every 2.5 s (to renew its lease). 0 means
	// DefaultBackgroundSync.
	Sync time.Duration

	mu      sync.Mutex // guards runs, closed, polling and stop
	runs    map[string]*bgRun
	closed  bool
	polling bool           // the poller (poll) runs
	stop    chan struct{}  // closed by Close: the poller returns
	wg      sync.WaitGroup // one per watcher goroutine (watch), and the poller
	// saving orders the writes to Shared: saveRunning's batch holds it, a lone save (a
	// response's first and last) holds it for reading, so that no batch rewrites a record
	// after its terminal one.
	saving sync.RWMutex
}

// Running reports how many background responses have not ended (for tests and metrics).
func (b *Background) Running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, run := range b.runs {
		if !run.hasEnded() {
			n++
		}
	}
	return n
}

// Done returns a channel closed once the background response id of owner has ended (its
// terminal event kept, its connection core closed), or nil when this server keeps no
// background response id of owner.
func (b *Background) Done(id, owner string) <-chan struct{} {
	if run := b.lookup(id, owner); run != nil {
		return run.done
	}
	return nil
}

// Close ends every background response still running (without a terminal event, like a
// client that goes), waits for them, and gives the bytes of their kept events back to the
// Budget (followers still reading finish; the events go with the Background). A server drains its
// connection cores first (they end within the shutdown grace), so that Close finds none
// running. Later creates are refused server_shutting_down.
func (b *Background) Close() {
	b.mu.Lock()
	b.closed = true
	if b.polling {
		close(b.stop)
		b.polling = false
	}
	runs := make([]*bgRun, 0, len(b.runs))
	for _, run := range b.runs {
		runs = append(runs, run)
	}
	b.mu.Unlock()
	for _, run := range runs {
		run.conn.Close()
	}
	b.wg.Wait()
	for _, run := range runs {
		// The events stay for the followers still reading them; the server's budget ends
		// with it.
		run.mu.Lock()
		if run.expiry != nil {
			run.expiry.Stop()
		}
		run.budget.Grow(-run.bytes)
		run.bytes = 0
		run.dropOutputLocked()
		run.mu.Unlock()
	}
}

// lookup returns the run id of owner, or nil (also on a nil Background).
func (b *Background) lookup(id, owner string) *bgRun {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if run := b.runs[id]; run != nil && run.owner == owner {
		return run
	}
	return nil
}

// forget drops run and gives its events' bytes back to the Budget.
func (b *Background) forget(run *bgRun) {
	b.mu.Lock()
	if b.runs[run.id] == run {
		delete(b.runs, run.id)
	}
	b.mu.Unlock()
	run.mu.Lock()
	if run.expiry != nil {
		run.expiry.Stop()
	}
	run.budget.Grow(-run.bytes)
	run.bytes, run.events = 0, nil
	run.first = run.next
	run.dropOutputLocked()
	run.mu.Unlock()
}

// watch closes run's connection core once its response has ended, writes its terminal record
// to Shared, and forgets its events Keep later. untrack is the server's. While it runs, the
// poller writes it (saveRunning).
func (b *Background) watch(run *bgRun, ps *pendingSegment, untrack func()) {
	defer b.wg.Done()
	select {
	case <-ps.done:
	case <-run.conn.Done():
	}
	run.conn.Close() // a rollout suspended behind the terminal event ends with it
	untrack()
	keep := b.Keep
	if keep <= 0 {
		keep = DefaultBackgroundKeep
	}
	run.mu.Lock()
	run.ended = true
	run.expiry = time.AfterFunc(keep, func() { b.forget(run) })
	run.wakeLocked()
	run.mu.Unlock()
	if b.Shared != nil {
		b.save(run, true)
	}
	close(run.done)
}

// bgRun is one background response: the emitter of its segment, which keeps its events.
type bgRun struct {
	// Immutable once registered
	id     string
	owner  string
	conn   *session.Conn
	budget *session.Budget
	max    int64
	done   chan struct{} // closed by watch once the response has ended

	mu     sync.Mutex // guards the fields below
	events []bgEvent  // the kept events; events[i] has sequence_number first+i
	first  int
	next   int   // the sequence_number of the next event
	bytes  int64 // counted in budget: encodings plus bgEventOverhead each
	resp   protocol.Response
	begun  bool // response.created has been sent
	final  *protocol.Response
	ended  bool // no more events will come
	cancel bool // POST …/cancel was accepted
	// out is the output built by the events so far (GET shows it while the response runs),
	// until the terminal Response, which has it all; its buffers are counted in budget.
	out    bgOutput
	wake   chan struct{}
	expiry *time.Timer

	// The writes to Background.Shared (bgshared.go): ver counts the changes of the Response a
	// record carries (resp, begun, final); saved and savedVer are the sequence_number after
	// the last event written and the version last written, at written.
	ver, saved, savedVer int
	written              time.Time
	// endSaved: its terminal record was written to Background.Shared; only then does a record
	// that is gone mean that the response was deleted (before, it may never have been written).
	endSaved bool
}

type bgEvent struct {
	typ  string
	data []byte
}

// emit keeps ev (the rollout goroutine calls it): the oldest events go when the kept ones
// exceed max or the Budget has no room for ev, but the newest is always kept.
func (run *bgRun) emit(ev *protocol.Event) error {
	data := protocol.AppendEvent(nil, ev)
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.ended {
		return nil
	}
	run.events = append(run.events, bgEvent{typ: string(ev.Type), data: data})
	run.next = ev.SequenceNumber + 1
	add := int64(len(data)) + bgEventOverhead
	run.bytes += add
	// Over the bound, or when the budget has no room for the new event, the oldest events go;
	// the newest is kept (counted over the budget if need be).
	reserved := run.budget.TryReserve(add)
	for (run.bytes > run.max || !reserved) && len(run.events) > 1 {
		n := int64(len(run.events[0].data)) + bgEventOverhead
		run.events[0] = bgEvent{}
		run.events = run.events[1:]
		run.first++
		run.bytes -= n
		run.budget.Release(n)
		if !reserved {
			reserved = run.budget.TryReserve(add)
		}
	}
	if !reserved {
		run.budget.Grow(add)
	}
	run.budget.Grow(run.out.apply(ev)) // the output's buffers: counted over the budget if need be, as the newest event
	if ev.Response != nil {
		run.ver++
		run.resp, run.begun = *ev.Response, true
		switch ev.Type {
		case protocol.EventCompleted, protocol.EventIncomplete, protocol.EventFailed:
			final := *ev.Response
			run.final = &final
			run.dropOutputLocked() // the terminal Response has it all
		}
	}
	run.wakeLocked()
	return nil
}

// dropOutputLocked drops the output built by the events and gives its buffers' bytes back to
// the Budget.
func (run *bgRun) dropOutputLocked() {
	run.budget.Grow(-run.out.bytes)
	run.out = bgOutput{}
}

func (run *bgRun) errorFrame(*protocol.Error) {}

// cancelled reports whether the response was cancelled by POST …/cancel: the sink then ends
// it with status cancelled rather than incomplete.
func (run *bgRun) cancelled() bool {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.cancel
}

func (run *bgRun) wakeLocked() {
	close(run.wake)
	run.wake = make(chan struct{})
}

// snapshot is what GET answers for a run: the terminal Response once there is one, else the
// latest one sent (status in_progress) with the output as it stands (bgOutput: the items done
// and those in progress, with what they hold so far), or queued before response.created.
func (run *bgRun) snapshot() protocol.Response {
	run.mu.Lock()
	defer run.mu.Unlock()
	r := run.snapshotLocked()
	if run.final == nil && run.begun {
		r.Output = run.out.list()
	}
	return r
}

// snapshotLocked is snapshot without the output in progress (the Response as last sent): what
// the record on a shared store carries (bgshared.go), so that each of its writes costs the
// new events, not the whole output again.
func (run *bgRun) snapshotLocked() protocol.Response {
	if run.final != nil {
		return *run.final
	}
	r := run.resp
	if !run.begun {
		r.Status = protocol.ResponseQueued
	}
	return r
}

// getEndedBackground answers GET of a background response of this server that has ended
// failed, while its events are kept, with its terminal Response, and reports whether it did:
// a failed Response is not stored, and a poller must see how the response ended. On a shared
// store its record must still be there (404 once it was deleted on any instance). Any other
// terminal Response is the store's to answer (404 once it was deleted).
func (h *HTTP) getEndedBackground(w http.ResponseWriter, r *http.Request, id, owner string) bool {
	run := h.Background.endedRun(id, owner)
	if run == nil {
		return false
	}
	run.mu.Lock()
	final := run.final
	run.mu.Unlock()
	if final == nil || final.Status != protocol.ResponseFailed {
		return false // not ended, or stored: the store answers (404 once it was deleted)
	}
	if h.deleted(w, r, run) {
		return true
	}
	writeJSON(w, http.StatusOK, *final)
	return true
}

// backgroundUnavailable answers background:true on a server without background mode.
func backgroundUnavailable() *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "background",
		"background:true is not supported by this server (no store).")
}

// createBackground serves a POST /v1/responses with background:true: the response starts on
// its own connection core and the request answers at once — its Response (status queued or
// in_progress) as JSON, or with stream:true its events as they come, like a follower from
// the first one. The request's going does not stop the response.
func (h *HTTP) createBackground(w http.ResponseWriter, r *http.Request, p *protocol.CreateParams, res *session.Reservation, owner string) {
	b := h.Background
	if b == nil || h.Options.Store == nil {
		res.Release()
		h.fail(w, backgroundUnavailable())
		return
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		res.Release()
		h.fail(w, protocol.Errorf(http.StatusServiceUnavailable, protocol.CodeShuttingDown, "", "The server is shutting down."))
		return
	}
	if max := h.Budget.Max(); max > 0 && h.Budget.InUse() >= max {
		res.Release()
		h.fail(w, session.BudgetFullError("another background response"))
		return
	}
	conn := session.NewConn(idleTransport{}, h.session(r, owner))
	untrack := func() {}
	if h.Track != nil {
		untrack = h.Track(conn)
	}
	opts := h.Options
	max := b.MaxEventBytes
	if max <= 0 {
		max = DefaultBackgroundEventBytes
	}
	run := &bgRun{owner: owner, conn: conn, budget: h.Budget, max: max, done: make(chan struct{}), wake: make(chan struct{})}
	ps, err := opts.registry(conn).create(p, run, false, opts.counters())
	res.Release()
	if err != nil {
		conn.Close()
		untrack()
		h.fail(w, err)
		return
	}
	run.id = ps.seg.id
	run.mu.Lock()
	if !run.begun {
		run.resp = ps.resp
	}
	run.mu.Unlock()
	b.mu.Lock()
	if b.runs == nil {
		b.runs = make(map[string]*bgRun)
	}
	b.runs[run.id] = run
	b.wg.Add(1)
	b.mu.Unlock()
	if b.Shared != nil {
		// Before the answer, so that the client finds it on any instance at once; from then
		// on the poller writes it with the others.
		b.save(run, false)
		b.mu.Lock()
		b.startPollingLocked()
		b.mu.Unlock()
	}
	go b.watch(run, ps, untrack)
	if p.Stream {
		run.follow(w, r, -1, h.WriteTimeout)
		return
	}
	writeJSON(w, http.StatusOK, run.snapshot())
}

// getBackground serves GET /v1/responses/{id} for a background response of this server: with
// stream (streamParams: the query stream=true, or a JSON body {"stream":true} as openai-go
// sends it) its events after starting_after (a sequence_number; all when absent) and then the live ones
// until the terminal event; without, the running response's snapshot. It reports false when
// the request is the store's to answer (a plain GET of no running background response).
func (h *HTTP) getBackground(w http.ResponseWriter, r *http.Request, id, owner string) bool {
	stream, after, err := streamParams(r)
	if err != nil {
		h.fail(w, err)
		return true
	}
	run := h.Background.lookup(id, owner)
	if !stream {
		if run == nil || run.hasEnded() {
			return false // the store has its terminal Response
		}
		writeJSON(w, http.StatusOK, run.snapshot())
		return true
	}
	if run == nil {
		if h.followShared(w, r, id, owner, after) {
			return true
		}
		if st := h.Options.Store; st != nil {
			if _, err := st.Get(r.Context(), id, owner); err == nil {
				h.fail(w, protocol.Errorf(http.StatusBadRequest, protocol.CodeEventsExpired, "stream",
					"No events are kept for response '%s': it was not created with background:true, or its events expired; GET it without stream.", id))
				return true
			}
		}
		WriteError(w, notFound(id))
		return true
	}
	if h.deleted(w, r, run) {
		return true
	}
	run.follow(w, r, after, h.WriteTimeout)
	return true
}

// follow streams run's events after sequence_number after as SSE: the kept ones at once,
// then each as it comes, until the terminal event (or the run's end) or until the client
// goes. A resume from before the first kept event is answered response_events_expired (400)
// before the stream starts, or with an error event and the stream's end when a slow follower
// falls behind the kept events; a starting_after past the last event is invalid_value: 400 when
// the response has ended, else an error event when it ends.
func (run *bgRun) follow(w http.ResponseWriter, r *http.Request, after int, timeout time.Duration) {
	next := nextAfter(after)
	out := newSSEOut(w, timeout)
	for {
		run.mu.Lock()
		first, last, ended, wake := run.first, run.next, run.ended, run.wake
		var batch []bgEvent
		if next >= first && next < last {
			batch = append(batch, run.events[next-first:]...)
		}
		run.mu.Unlock()
		switch {
		case next < first:
			out.fail(eventsExpired(run.id, first, run.max))
			return
		case ended && next > last: // known only at the end when the stream began while it ran
			out.fail(pastLastEvent(run.id, after, last))
			return
		}
		out.start()
		for _, ev := range batch {
			if out.event(ev.typ, ev.data) != nil {
				return
			}
		}
		next += len(batch)
		if len(batch) == 0 {
			out.flush()
		}
		if ended && next >= last {
			return
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return
		}
	}
}

// nextAfter returns the sequence_number of the first event after after (≥ 0): after+1, but
// math.MaxInt for after = math.MaxInt, which is past every event all the same (after+1 would
// wrap around to before the first).
func nextAfter(after int) int {
	if after == math.MaxInt {
		return after
	}
	return after + 1
}

// eventsExpired is the error of a resume of response id from before first, the first event
// kept (at most max bytes of events are).
func eventsExpired(id string, first int, max int64) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeEventsExpired, "starting_after",
		"Events of response '%s' before sequence_number %d are no longer kept (at most %d bytes of events are kept per background response): resume with starting_after %d or later, or GET the response without stream.",
		id, first, max, first-1)
}

// pastLastEvent is the error of a resume after after, past next-1, the last event of the
// ended response id.
func pastLastEvent(id string, after, next int) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "starting_after",
		"starting_after %d is past the last event of response '%s' (sequence_number %d).", after, id, next-1)
}

// sseOut is one SSE answer: its header goes before the first event (start); an error before
// it is the JSON error answer, after it an SSE error event.
type sseOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration // of each write; 0: none
	started bool
	buf     []byte
}

func newSSEOut(w http.ResponseWriter, timeout time.Duration) *sseOut {
	return &sseOut{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// start writes the header of the stream unless it has.
func (o *sseOut) start() {
	if o.started {
		return
	}
	o.started = true
	hd := o.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
}

// fail ends the answer with e: the JSON error before the stream started, else an error event.
func (o *sseOut) fail(e *protocol.Error) {
	if !o.started {
		WriteError(o.w, e)
		return
	}
	_ = o.event(string(protocol.EventError), protocol.AppendError(nil, e))
}

// event writes one event (its type and encoded data) within the timeout.
func (o *sseOut) event(typ string, data []byte) error {
	o.buf = protocol.AppendSSE(o.buf[:0], typ, data)
	return writeSSE(o.w, o.rc, o.timeout, o.buf)
}

// flush sends what is written.
func (o *sseOut) flush() { _ = o.rc.Flush() }

// writeSSE writes one encoded SSE event within timeout (0: none) and flushes it.
func writeSSE(w http.ResponseWriter, rc *http.ResponseController, timeout time.Duration, b []byte) error {
	if timeout > 0 {
		_ = rc.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}

// Cancel serves POST /v1/responses/{id}/cancel: a background response that is queued or in
// progress ends with status cancelled (its stream with response.incomplete carrying that
// status) and its Response is the answer; cancelling a cancelled one answers it again. A
// background response that ended otherwise is 400 response_already_completed ("Cannot cancel
// a completed response."), a response created without background:true is 400
// response_not_background ("Cannot cancel a synchronous response."), an unknown one 404.
func (h *HTTP) Cancel(w http.ResponseWriter, r *http.Request, id, owner string) {
	run := h.Background.lookup(id, owner)
	if run != nil && run.storedEnd() {
		run = nil // the store has its terminal Response, unless it was deleted
	}
	if run != nil && h.deleted(w, r, run) {
		return // a failed one, deleted on another instance sharing the store
	}
	if run != nil {
		run.requestCancel()
		select {
		case <-run.done:
		case <-r.Context().Done():
			return
		}
		final := run.snapshot()
		answerCancel(w, &final)
		return
	}
	if h.cancelShared(w, r, id, owner) {
		return
	}
	sr, ok := h.stored(w, r, id, owner)
	if !ok {
		return
	}
	if !sr.Response.Background {
		WriteError(w, protocol.Errorf(http.StatusBadRequest, protocol.CodeNotBackground, "",
			"Cannot cancel a synchronous response."))
		return
	}
	answerCancel(w, &sr.Response)
}

// requestCancel cancels run unless it has ended: it then ends with status cancelled.
func (run *bgRun) requestCancel() {
	run.mu.Lock()
	live := !run.ended && run.final == nil
	if live {
		run.cancel = true
	}
	run.mu.Unlock()
	if live {
		_ = run.conn.CancelQuietly(run.id, protocol.ReasonCancelled) // an error: it is ending anyway
	}
}

// answerCancel answers a cancel of the background response resp, which has ended.
func answerCancel(w http.ResponseWriter, resp *protocol.Response) {
	if resp.Status == protocol.ResponseCancelled {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	article := "a"
	if resp.Status == protocol.ResponseIncomplete || resp.Status == protocol.ResponseInProgress {
		article = "an"
	}
	WriteError(w, protocol.Errorf(http.StatusBadRequest, protocol.CodeAlreadyCompleted, "",
		"Cannot cancel %s %s response.", article, resp.Status))
}
