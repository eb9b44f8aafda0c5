package compat

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// emitter sends one public Response's events: WebSocket frames, SSE events, or (for a JSON
// POST) only the terminal Response.
type emitter interface {
	emit(ev *protocol.Event) error
	// errorFrame sends a connection error frame (the age limit answer to a queued create).
	errorFrame(e *protocol.Error)
}

// pendingSegment is a public Response that will run on a rollout: the new rollout of a
// create, or a suspended rollout resumed by a hot-path continuation.
type pendingSegment struct {
	seg  *segment
	resp protocol.Response
	// settings: resp's settings encoded once (encodeSettings), copied into its response events
	settings *protocol.Settings
	input    []protocol.Item
	store    bool
	warmup   bool
	parent   string // previous_response_id, evicted when this segment fails
	// successor: the segment continues a steered one (its parent) on the same rollout
	successor bool
	emitter   emitter
	// counters and path (one of its fields) are counted when the segment starts
	counters *Counters
	path     *atomic.Int64
	cold     *protocol.Continuation // why a continuation took the cold path (nil: not one)
	done     chan struct{}          // closed when the segment's terminal event has been sent
}

// rolloutSink turns a rollout's happenings into public-shape events, one Response per segment:
// sequence_number and output_index from 0 per segment, a terminal
// response.completed at each suspension, nothing for a rollout that ends behind a completed
// segment. The rollout goroutine owns cur, seq, outBase; next is handed over under owner.mu.
type rolloutSink struct {
	owner *registry
	key   string

	cur     *pendingSegment
	seq     int
	outBase int // the rollout's output_index of the segment's first item
	begun   bool
	// last is the segment that ended last, and lastSeq its next sequence_number: steer events
	// that follow its terminal event (response.steer.pending) continue its sequence.
	// lastLatest: last ended suspended (and stored when asked), the latest segment of the
	// rollout, which a continuation resumes (SharedParkState).
	last       *pendingSegment
	lastSeq    int
	lastLatest bool
}

// registry is the state shared by a connection's reader and its rollout sinks: the segments
// not yet ended. Ended segments are entries of the connection's registry
// (session.Conn.KeepResponse, Response, ForgetResponse), which bounds and evicts them.
type registry struct {
	conn *session.Conn

	mu       sync.Mutex                 // guards next, inflight and the ended segments' steered
	next     map[string]*pendingSegment // rollout key → segment waiting to run on it
	inflight map[string]*pendingSegment // segments accepted and not yet ended, by id
}

func newRegistry(conn *session.Conn) *registry {
	return &registry{conn: conn, next: make(map[string]*pendingSegment), inflight: make(map[string]*pendingSegment)}
}

// endedSegment returns the ended segment id (a use: it becomes the connection's most recently used
// entry), or nil.
func (r *registry) endedSegment(id string) *segment {
	v, _ := r.conn.Response(id)
	seg, _ := v.(*segment)
	return seg
}

// peek returns the ended segment id without a use, or nil.
func (r *registry) peek(id string) *segment {
	v, _ := r.conn.PeekResponse(id)
	seg, _ := v.(*segment)
	return seg
}

// take moves the segment queued for this rollout into cur, if there is one.
func (s *rolloutSink) take() bool {
	if s.cur != nil {
		return true
	}
	s.owner.mu.Lock()
	ps := s.owner.next[s.key]
	delete(s.owner.next, s.key)
	s.owner.mu.Unlock()
	if ps == nil {
		return false
	}
	s.cur, s.seq, s.begun = ps, 0, false
	return true
}

// send sends ev as the next event of the current segment; a response event copies the
// segment's encoded settings.
func (s *rolloutSink) send(ev *protocol.Event) error {
	ev.SequenceNumber = s.seq
	ev.Settings = s.cur.settings
	s.seq++
	return s.cur.emitter.emit(ev)
}

// begin sends response.created and (unless a warm-up) response.in_progress.
func (s *rolloutSink) begin() {
	if s.begun {
		return
	}
	s.begun = true
	if ps := s.cur; ps.path != nil {
		ps.path.Add(1)
		if ps.warmup {
			ps.counters.WarmUp.Add(1)
		}
		if ps.cold != nil {
			ps.counters.countCold(ps.cold.Reason)
		}
	}
	_ = s.send(new(protocol.Created(&s.cur.resp)))
	if !s.cur.warmup {
		_ = s.send(new(protocol.InProgress(&s.cur.resp)))
	}
}

// KeepAlive implements sampler.KeepAliver. A hot-path segment that has sent nothing yet (its
// lifecycle events wait for its first output event) begins now: response.created and
// response.in_progress; otherwise a repeated response.in_progress of the segment being
// sampled, with its next sequence_number. A warm-up sends nothing; a JSON POST's emitter
// keeps only the terminal Response.
func (s *rolloutSink) KeepAlive() bool {
	if !s.take() || s.cur.warmup {
		return false
	}
	if !s.begun {
		s.begin()
		return true
	}
	return s.send(new(protocol.InProgress(&s.cur.resp))) == nil
}

func (s *rolloutSink) Started() {
	if s.take() {
		s.begin()
	}
}

func (s *rolloutSink) Event(ev *protocol.Event) error {
	if !s.take() {
		return nil
	}
	s.begin()
	ev.OutputIndex -= s.outBase
	err := s.send(ev)
	ev.OutputIndex += s.outBase
	return err
}

func (s *rolloutSink) Suspended(sp session.Suspension) {
	if !s.take() {
		return
	}
	s.begin()
	ps := s.cur
	output := sp.Output
	s.outBase += len(output)
	s.finish(ps, protocol.ResponseCompleted, "", nil, output, sp.StepUsage, sp.Context, sp.PendingCallIDs, true)
}

// Ended answers the rollout's end. The rollout then leaves the connection's registry
// (Conn.Forget): its ended segments, entries of that registry, hold its items.
func (s *rolloutSink) Ended(e session.Ending) {
	defer s.owner.conn.Forget(s.key)
	if !s.take() {
		return // ended behind a completed segment: silent; its items stay for the cold path
	}
	ps := s.cur
	if e.Err != nil && e.Status != protocol.ResponseFailed {
		s.cur = nil // the client is gone: nothing is sent, but a store:true response is stored
		s.persistGone(ps, e)
		s.owner.ended(ps)
		return
	}
	if !s.begun && !e.Sampling && e.Reason == protocol.ReasonConnectionLimit {
		s.cur = nil // a queued create at the age limit: the error frame answers it
		ps.emitter.errorFrame(s.owner.conn.ConnectionLimitError())
		s.owner.ended(ps)
		return
	}
	s.begin()
	output := e.Output[min(s.outBase, len(e.Output)):]
	s.finish(ps, e.Status, e.Reason, e.Error, output, e.StepUsage, e.Context, nil, false)
}

// persistGone stores the segment ps that its client's disconnect ended (e.Err set) as it
// ended, incomplete with its output so far, when it is store:true and its client saw its
// response.created (a WebSocket or SSE stream; not a JSON POST, answered 499): that client
// finds it with GET /v1/responses/{id}, as the append shape's rollouts are stored. Nothing
// is sent and the connection keeps nothing: it is closing.
func (s *rolloutSink) persistGone(ps *pendingSegment, e session.Ending) {
	if _, ok := ps.emitter.(*collector); !s.begun || ok {
		return // never announced, or a JSON POST's: the client never saw its id
	}
	final := ps.final(e.Status, e.Reason, e.Error, e.Output[min(s.outBase, len(e.Output)):], e.StepUsage, time.Now().Unix())
	_ = s.owner.conn.Persist(&final, ps.input, nil) // a failed write has nobody to tell; the store counts it
}

// final is ps's terminal Response (protocol.Finish); a warm-up samples nothing and reports no
// usage.
func (ps *pendingSegment) final(status, reason string, rerr *protocol.ResponseError, output []protocol.Item, usage protocol.Usage, now int64) protocol.Response {
	if ps.warmup {
		usage = protocol.Usage{}
	}
	return protocol.Finish(ps.resp, status, reason, rerr, output, usage, now)
}

// finish stores a store:true segment, then sends its terminal event and records it for
// previous_response_id. When the store does not accept it the segment ends response.failed
// (store_unavailable), its parent is kept, and a suspended rollout behind it is cancelled.
func (s *rolloutSink) finish(ps *pendingSegment, status, reason string, rerr *protocol.ResponseError,
	output []protocol.Item, usage protocol.Usage, chain []protocol.Item, pending []string, suspended bool) {
	if bg, ok := ps.emitter.(*bgRun); ok && status == protocol.ResponseIncomplete && reason == protocol.ReasonCancelled && bg.cancelled() {
		status, reason = protocol.ResponseCancelled, "" // POST /v1/responses/{id}/cancel
	}
	now := time.Now().Unix()
	final := ps.final(status, reason, rerr, output, usage, now)
	r := s.owner
	storeFailed := false
	if !r.conn.Persist(&final, ps.input, nil) {
		status, storeFailed = protocol.ResponseFailed, true
		final = ps.final(status, "", session.StoreFailed(), output, usage, now)
	}
	seg := ps.seg
	seg.chain = chain
	seg.pending = pending
	seg.suspended = suspended
	seg.bytes = session.ItemsBytes(ps.input) + session.ItemsBytes(output) + 256 + int64(len(seg.settings))
	latest := ""
	if suspended && !storeFailed {
		latest = seg.id // a continuation of it resumes the rollout
	}
	r.conn.SetLatest(s.key, latest)
	if status == protocol.ResponseFailed {
		// A failed continuation evicts its parent, unless it forked from another lane
		// (a failed fork keeps its parent).
		if parent := r.peek(ps.parent); parent != nil && parent.lane == ps.seg.lane && !storeFailed {
			r.conn.ForgetResponse(parent.id)
		}
	} else {
		r.conn.KeepResponse(seg.id, seg.rollout, seg.chain, seg.bytes, seg)
	}
	// No longer in flight before the client can see the terminal event, and only once it is
	// kept: a continuation sent right after it must find the segment (or its eviction), never
	// "in progress" (a lookup asks inflight first, then the connection).
	r.mu.Lock()
	delete(r.inflight, ps.seg.id)
	r.mu.Unlock()
	if storeFailed && suspended {
		_ = r.conn.CancelQuietly(s.key, protocol.ReasonCancelled)
	}
	_ = s.send(new(protocol.Terminal(&final)))
	s.cur, s.last, s.lastSeq, s.lastLatest = nil, ps, s.seq, suspended && !storeFailed
	close(ps.done)
}

// ended marks ps as answered: it is no longer in flight and its done channel closes.
func (r *registry) ended(ps *pendingSegment) {
	r.mu.Lock()
	delete(r.inflight, ps.seg.id)
	r.mu.Unlock()
	close(ps.done)
}
