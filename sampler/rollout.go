package sampler

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherd/tether/protocol"
)

// Rollout is one running agent rollout: a Response that spans sampling
// steps, suspended at each tool call until Resume. One goroutine, Run (started by its owner, or
// by Start), owns all of its state; the methods talk to it through channels and are safe for
// concurrent use. The rollout's State is kept here and nowhere else: its owners ask it.
type Rollout struct {
	// Immutable
	cfg   Config
	hooks hooks // cfg.Sink's optional interfaces (Wrapper)
	inbox chan resumeRequest
	done  chan struct{}
	// ending is closed when the rollout has ended (State Ended), before Sink.Ended: a
	// Resume that lost the race to the end stops waiting then, and gives its Ticket back,
	// which Sink.Ended may be waiting for (the lane's turn for the terminal event).
	ending chan struct{}
	ctx    context.Context // ends on Cancel or when Start's ctx ends
	cancel context.CancelCauseFunc
	// endMu orders a Cancel against the rollout settling on its ending: once settled (the
	// loop returned an ending), a Cancel is refused; a Cancel before it is the ending.
	endMu   sync.Mutex
	settled bool

	// state is the rollout's phase. It changes under stateMu, which is also held while the
	// Sink's StateObserver hears of the change, so that observers see changes in order.
	state   atomic.Int32
	stateMu sync.Mutex

	// sinkMu is held around every Sink call, so that KeepAlive (another goroutine) never
	// interleaves with the rollout's own events; inStep is guarded by it.
	sinkMu    sync.Mutex
	inStep    bool      // a sampling step is running: KeepAlive may send
	sinkCalls int       // Sink calls made
	seenCalls int       // sinkCalls at the last KeepAlive check
	quietFrom time.Time // when KeepAlive last saw sinkCalls change (or sent)

	// Steering (steer.go): guarded by steerMu
	steerMu     sync.Mutex
	steers      []Steer                 // handed over by Steer, not yet taken
	heldSteers  int                     // len(held), for Steer's bound
	stepCancel  context.CancelCauseFunc // cuts the sampling step short; nil between steps
	steerClosed bool                    // the rollout has ended or parked
	steerParked bool                    // steerClosed because the rollout parked
	steerWake   chan struct{}           // wakes a suspended rollout for a steer
	parkWake    chan struct{}           // wakes a suspended rollout for Park

	// Owned by the loop
	stepCtx    context.Context     // the sampling step's context (r.ctx, cut short by Steer)
	held       []Steer             // taken at tool calls: their input follows the next Resume's
	announced  int                 // held[:announced] have had SteerPending
	items      []protocol.Item     // the context: history, inputs and model items, append-only
	callIDs    map[string]struct{} // call_ids of the function_call items in items (and the open step)
	ms         ModelSession        // nil until opened
	fed        int                 // len(items) the model session has been given
	stepOut    int                 // items[fed:fed+stepOut] are the last step's model items
	rng        *mrand.ChaCha8
	ticket     Ticket // held or waited for; nil when none
	holding    bool   // the ticket is held (between Wait and Release)
	started    bool   // Sink.Started was called
	step       int    // sampling steps begun
	calls      int    // function calls made
	output     []protocol.Item
	suspendAt  int // len(output) at the previous suspension
	usage      protocol.Usage
	stepUsage  protocol.Usage
	pending    []string
	emit       emitter
	deadline   time.Time      // when the current suspension times out; zero: never
	restored   *ParkedRollout // Unpark's value, taken by loop
	restoredIn *Resume        // Unpark's input, taken by loop
	reopen     bool           // open the model session with Unparker.Unpark(modelState)
	modelState []byte         // the parked session's state, until reopen
	parkedAs   *ParkedRollout // set when the rollout parked: Run hands it to the Sink
}

// State is a rollout's phase. Queued → Sampling → (Suspended → Resuming → Sampling)* → Ended;
// any phase may go to Ended. A suspended rollout may instead go to Parked (see Park): that
// Rollout value's goroutine has ended and its state lives on in a ParkedRollout value; Unpark
// continues it in a new Rollout, which starts Suspended.
type State int32

const (
	// Queued: started, waiting for its first ticket.
	Queued State = iota
	// Sampling: holds its ticket and samples (or prefills, for a warm-up).
	Sampling
	// Suspended: stopped at tool calls (or after an answer, Config.SuspendOnAnswer), waiting
	// for Resume.
	Suspended
	// Resuming: Resume's input is accepted or being checked; waiting for the ticket.
	Resuming
	// Ended: Sink.Ended has been or is being called.
	Ended
	// Parked: the rollout parked (ParkSink.Parked has been or is being called); it is
	// continued by Unpark in a new Rollout value.
	Parked
)

// String returns the phase's name: "queued", "sampling", "suspended", "resuming", "ended",
// "parked".
func (s State) String() string {
	if s < Queued || s > Parked {
		return "unknown"
	}
	return [...]string{"queued", "sampling", "suspended", "resuming", "ended", "parked"}[s]
}

// StateObserver is an optional interface of a Sink (every one of a Wrapper chain that has it,
// outermost first): StateChanged is called after every change
// of the rollout's State, in order, from the goroutine that made it (the rollout's, Resume's
// caller for Suspended → Resuming, Unpark's caller for Parked → Suspended). It must not call
// the Rollout's methods.
type StateObserver interface {
	StateChanged(from, to State)
}

// State returns the rollout's phase. Safe for concurrent use.
func (r *Rollout) State() State { return State(r.state.Load()) }

// setState moves the rollout to to and tells the Sink's StateObserver. With want >= 0 it
// changes only from want and reports whether it did.
func (r *Rollout) setState(want, to State) bool {
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	from := State(r.state.Load())
	if want != anyState && from != want {
		return false
	}
	if from == to {
		return true
	}
	r.state.Store(int32(to))
	for _, o := range r.hooks.state {
		o.StateChanged(from, to)
	}
	return true
}

// anyState is setState's want for an unconditional change.
const anyState State = -1

type resumeRequest struct {
	in    Resume
	reply chan error // buffered 1
}

// cancelCause is the cause of a rollout's context after Cancel(reason).
type cancelCause struct{ reason string }

func (c *cancelCause) Error() string { return "sampler: rollout cancelled (" + c.reason + ")" }
func (c *cancelCause) Unwrap() error { return ErrCancelled }

// New returns a Queued rollout; its owner runs it with Run, in a goroutine of its own. Run
// waits for cfg.Ticket, opens a session of cfg.Model and samples cfg.History and cfg.Input (or,
// with cfg.StartSuspended, prefills them and suspends). It returns, after calling
// cfg.Sink.Ended, when the rollout ends: see Ending. When ctx ends (client disconnect) Run stops
// at once and frees the rollout; Ended is still called. cfg.Model, cfg.Sink are required; a nil
// Ticket means no queue.
func New(ctx context.Context, cfg Config) *Rollout {
	r := &Rollout{
		cfg:       cfg,
		inbox:     make(chan resumeRequest),
		done:      make(chan struct{}),
		ending:    make(chan struct{}),
		steerWake: make(chan struct{}, 1),
		parkWake:  make(chan struct{}, 1),
	}
	r.hooks = findHooks(cfg.Sink)
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	r.stepCtx = r.ctx
	r.rng = newRNG()
	r.emit.r = r
	r.emit.acc.budget = cfg.Budget
	return r
}

// Start is New followed by go Run, for an owner that does not count its goroutines.
func Start(ctx context.Context, cfg Config) *Rollout {
	r := New(ctx, cfg)
	go r.Run()
	return r
}

// newRNG returns the generator of a rollout's ids: ChaCha8 seeded from crypto/rand.
func newRNG() *mrand.ChaCha8 {
	var seed [32]byte
	rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}

// Resume continues a suspended rollout with in.Input (one function_call_output per pending
// call, then optional messages) and waits for in.Ticket before sampling. It returns once the
// rollout has accepted or refused the input: ErrNotSuspended when the rollout is not suspended
// (also matching ErrEnded once it has ended, ErrParked once it has parked: continue it with
// Unpark), or the *protocol.Error of CheckOutputs (400) when the input does not answer the
// pending calls, in which case the rollout stays suspended. On error the caller keeps
// ownership of in.Ticket.
func (r *Rollout) Resume(in Resume) error {
	if !r.setState(Suspended, Resuming) {
		switch r.State() {
		case Ended:
			return fmt.Errorf("%w: %w", ErrNotSuspended, ErrEnded)
		case Parked:
			return fmt.Errorf("%w: %w", ErrNotSuspended, ErrParked)
		}
		return ErrNotSuspended
	}
	req := resumeRequest{in: in, reply: make(chan error, 1)}
	select {
	case r.inbox <- req:
	case <-r.ending:
		return fmt.Errorf("%w: %w", ErrNotSuspended, ErrEnded)
	case <-r.done:
		return fmt.Errorf("%w: %w", ErrNotSuspended, ErrEnded)
	}
	select {
	case err := <-req.reply:
		return err
	case <-r.done:
		// The rollout may have accepted the input and ended right after: its answer wins.
		select {
		case err := <-req.reply:
			return err
		default:
		}
		return fmt.Errorf("%w: %w", ErrNotSuspended, ErrEnded)
	}
}

// Cancel ends the rollout with status incomplete and reason (protocol.ReasonCancelled when
// empty), whether it is queued, sampling or suspended. A sampling rollout stops at once: its
// open item is closed with status incomplete (output_item.done). Cancel does not wait (see
// Wait); it is a no-op once the rollout has ended or was already cancelled, and once it has
// parked (State Parked: cancel the Rollout that Unpark returns). A Cancel that races a park
// either ends the rollout or finds it parked.
func (r *Rollout) Cancel(reason string) { r.TryCancel(reason) }

// TryCancel is Cancel, and reports whether the cancel is the rollout's ending: true when it
// came before the rollout settled on an ending (even one its model had already finished: the
// rollout then ends incomplete with reason, its finished items as they are), false when the
// rollout had settled on another ending (completed, failed, incomplete for another reason):
// that ending's Sink.Ended is then made or under way, and Done closes after it. A parked
// rollout reports true and stays parked, as Cancel does.
func (r *Rollout) TryCancel(reason string) bool {
	if reason == "" {
		reason = protocol.ReasonCancelled
	}
	r.endMu.Lock()
	defer r.endMu.Unlock()
	if r.settled {
		return false
	}
	r.cancel(&cancelCause{reason: reason})
	return true
}

// settle makes e the rollout's ending unless a Cancel came first: then the ending is that
// cancel's (incomplete, its reason, e's step usage), so that a Cancel that TryCancel accepted
// always ends the rollout, even one whose model had finished or failed meanwhile. An ending
// nobody hears (incomplete with Err: a disconnect, a failed Sink) stays.
func (r *Rollout) settle(e Ending) Ending {
	r.endMu.Lock()
	defer r.endMu.Unlock()
	r.settled = true
	var c *cancelCause
	if (e.Status == protocol.ResponseIncomplete && e.Err != nil) || !errors.As(context.Cause(r.ctx), &c) {
		return e
	}
	if e.Status == protocol.ResponseIncomplete && e.Reason == c.reason {
		return e
	}
	return Ending{Status: protocol.ResponseIncomplete, Reason: c.reason, StepUsage: e.StepUsage}
}

// Done is closed when the rollout's goroutine has ended (after Sink.Ended, or
// ParkSink.Parked, returned).
func (r *Rollout) Done() <-chan struct{} { return r.done }

// Wait blocks until the rollout's goroutine has ended.
func (r *Rollout) Wait() { <-r.done }

// Run is the rollout's goroutine (see New). It returns when the rollout has ended; call it
// once.
func (r *Rollout) Run() {
	defer close(r.done)
	defer r.cancel(nil)
	e := r.loop()
	if p := r.parkedAs; p != nil {
		r.parked(p)
		return
	}
	e = r.settle(e)
	if r.ms != nil {
		if err := r.closeModel(); err != nil && e.Err == nil {
			e.Err = err
		}
	}
	if r.reopen {
		r.dropModelState() // unparked and ended before its session was reopened
	}
	e.Output = r.output[:len(r.output):len(r.output)]
	e.Usage = r.usage
	e.Context = r.context()
	e.Sampling = r.holding
	r.closeSteers()
	r.setState(anyState, Ended)
	close(r.ending)
	r.sinkMu.Lock()
	r.sinkCalls++
	r.cfg.Sink.Ended(e)
	r.sinkMu.Unlock()
	if r.ticket != nil {
		r.ticket.Release() // after Ended: this rollout's last event precedes the next one's first
	}
}

// loop runs the rollout until it ends and returns how (Output, Usage, … are filled by run).
func (r *Rollout) loop() Ending {
	r.callIDs = make(map[string]struct{})
	if p := r.restored; p != nil {
		r.restored = nil
		if e, ok := r.restore(p); !ok {
			return e
		}
		return r.run()
	}
	r.appendItems(r.cfg.History)
	r.appendItems(r.cfg.Input)
	r.ticket = r.cfg.Ticket
	if r.cfg.StartSuspended {
		// A warm-up prefills without sampling. It still waits for its ticket, so that its
		// suspension is reported in FIFO order after the responses queued before it.
		if r.ticket != nil {
			if err := r.ticket.Wait(r.ctx); err != nil {
				return r.interrupted()
			}
			r.holding = true
		}
		r.setState(anyState, Sampling)
		if err := r.prefill(); err != nil {
			if r.ctx.Err() != nil {
				return r.interrupted()
			}
			r.started = true
			r.sinkStarted()
			return failed(err, protocol.Usage{})
		}
		if e, ok := r.suspend(); !ok {
			return e
		}
	}
	return r.run()
}

// run is the rollout's loop from its first (or next) turn on: wait for the ticket, sample,
// suspend, until the rollout ends.
func (r *Rollout) run() Ending {
	for {
		if r.ticket != nil {
			if err := r.ticket.Wait(r.ctx); err != nil {
				return r.interrupted()
			}
		}
		r.holding = true
		r.setState(anyState, Sampling)
		if !r.started {
			r.started = true
			r.sinkStarted()
		}
		r.applyBeforeStep()
		e, end, cut := r.sample()
		if end {
			return e
		}
		if r.applyAfterStep(cut) {
			continue // steered: a successor response samples on, still holding the ticket
		}
		if e, ok := r.suspend(); !ok {
			return e
		}
	}
}

// interrupted returns the ending of a rollout whose context ended: cancelled (incomplete with
// the Cancel reason) or disconnected (Err set).
func (r *Rollout) interrupted() Ending {
	cause := context.Cause(r.ctx)
	var c *cancelCause
	if errors.As(cause, &c) {
		return Ending{Status: protocol.ResponseIncomplete, Reason: c.reason, StepUsage: r.stepUsage}
	}
	return Ending{Status: protocol.ResponseIncomplete, Reason: protocol.ReasonCancelled, StepUsage: r.stepUsage, Err: cause}
}

// sample runs one sampling step. It reports end=true with the rollout's ending, or end=false
// when the rollout must suspend (tool calls, or an answer with SuspendOnAnswer) or apply a
// steer; cut reports a step interrupted by Steer (its open item ends incomplete).
func (r *Rollout) sample() (e Ending, end, cut bool) {
	r.pending = r.pending[:0]
	r.emit.reset()
	var res StepResult
	err := r.open()
	if err == nil {
		step := Step{
			Index:   r.step,
			Calls:   r.calls,
			Output:  r.items[r.fed : r.fed+r.stepOut : r.fed+r.stepOut],
			Input:   r.items[r.fed+r.stepOut : len(r.items) : len(r.items)],
			Context: r.context(),
		}
		r.fed, r.stepOut = len(r.items), 0
		r.step++
		ctx, cancel := r.stepContext()
		r.stepCtx = ctx
		r.setInStep(true)
		res, err = r.sampleModel(&step)
		r.setInStep(false)
		cut = r.endStep(ctx, cancel)
		r.stepCtx = r.ctx
		if cut {
			err, res.Incomplete = nil, protocol.ReasonSteered
		}
	}

	interrupted := r.ctx.Err() != nil
	over := r.emit.acc.over // the step's output did not fit in the memory budget
	status := protocol.StatusCompleted
	if interrupted || err != nil || over != nil || res.Incomplete != "" || r.emit.err != nil {
		status = protocol.StatusIncomplete
	}
	// Close the open item, unless nobody listens any more.
	quiet := r.emit.err != nil || (interrupted && !isCancel(r.ctx))
	r.emit.close(status, quiet)

	newItems := r.output[r.emit.first:]
	r.appendItems(newItems)
	r.emit.acc.release() // the items are the rollout's now: the Sink counts them
	r.stepOut = len(newItems)
	r.stepUsage = protocol.Usage{InputTokens: res.InputTokens, OutputTokens: res.OutputTokens}
	r.stepUsage.InputTokensDetails.CachedTokens = protocol.CachedTokens(res.CachedTokens, res.InputTokens)
	r.stepUsage.TotalTokens = res.InputTokens + res.OutputTokens
	r.usage = r.usage.Add(r.stepUsage)

	switch {
	case interrupted:
		return r.interrupted(), true, false
	case r.emit.err != nil:
		return Ending{Status: protocol.ResponseIncomplete, Reason: protocol.ReasonCancelled, StepUsage: r.stepUsage, Err: r.emit.err}, true, false
	case over != nil:
		return failed(over, r.stepUsage), true, false // whatever the backend made of the error
	case err != nil:
		return failed(err, r.stepUsage), true, false
	case res.Incomplete != "" && !cut:
		return Ending{Status: protocol.ResponseIncomplete, Reason: res.Incomplete, StepUsage: r.stepUsage}, true, false
	}
	for i := range newItems {
		// A call cut short by a steer is not pending: nobody is to answer it.
		if newItems[i].Type == protocol.ItemFunctionCall && newItems[i].Status != protocol.StatusIncomplete {
			r.pending = append(r.pending, newItems[i].CallID)
			r.calls++
		}
	}
	if len(r.pending) == 0 && !r.cfg.SuspendOnAnswer && !cut {
		return Ending{Status: protocol.ResponseCompleted, StepUsage: r.stepUsage}, true, false
	}
	return Ending{}, false, cut
}

func isCancel(ctx context.Context) bool {
	var c *cancelCause
	return errors.As(context.Cause(ctx), &c)
}

// suspend reports the suspension, releases the ticket and waits for a valid Resume. It returns
// ok=false with the ending when the rollout ends while suspended.
func (r *Rollout) suspend() (Ending, bool) {
	pending := append([]string(nil), r.pending...)
	s := Suspension{
		PendingCallIDs: pending,
		Output:         r.output[r.suspendAt:len(r.output):len(r.output)],
		Usage:          r.usage,
		StepUsage:      r.stepUsage,
		Context:        r.context(),
	}
	if sz, ok := r.ms.(StateSizer); ok {
		s.StateBytes = sz.StateBytes()
	}
	r.suspendAt = len(r.output)
	select {
	case <-r.parkWake: // a Park that asked before this suspension
	default:
	}
	r.setState(anyState, Suspended)
	r.sinkMu.Lock()
	r.sinkCalls++
	r.cfg.Sink.Suspended(s)
	r.sinkMu.Unlock()
	r.announceHeld(pending) // response.steer.pending follows the terminal event
	if r.ticket != nil {
		r.ticket.Release() // after Suspended: response.done precedes the next rollout's events
		r.ticket = nil
	}
	r.holding = false
	r.stepUsage = protocol.Usage{}
	r.deadline = time.Time{}
	if r.cfg.SuspendTimeout > 0 {
		r.deadline = time.Now().Add(r.cfg.SuspendTimeout)
	}
	return r.await(pending)
}

// await waits, suspended, for a valid Resume (ok=true). It returns ok=false with the ending
// when the rollout ends while suspended, or with r.parkedAs set when it parks.
func (r *Rollout) await(pending []string) (Ending, bool) {
	var timeout <-chan time.Time
	if !r.deadline.IsZero() {
		t := time.NewTimer(time.Until(r.deadline))
		defer t.Stop()
		timeout = t.C
	}
	var parkAt <-chan time.Time
	if r.cfg.ParkAfter > 0 && r.canPark() {
		t := time.NewTimer(r.cfg.ParkAfter)
		defer t.Stop()
		parkAt = t.C
	}
	for {
		select {
		case req := <-r.inbox:
			if perr := CheckOutputs(pending, r.hasCall, req.in.Input); perr != nil {
				r.setState(anyState, Suspended)
				req.reply <- perr
				continue
			}
			r.appendItems(req.in.Input)
			r.releaseHeld() // held steers follow the tool outputs
			r.ticket = req.in.Ticket
			req.reply <- nil
			return Ending{}, true
		case <-r.steerWake:
			r.steerWhileSuspended(pending)
		case <-r.parkWake:
			if r.tryPark(pending) {
				return Ending{}, false
			}
		case <-parkAt:
			if r.tryPark(pending) {
				return Ending{}, false
			}
		case <-r.ctx.Done():
			return r.interrupted(), false
		case <-timeout:
			return Ending{Status: protocol.ResponseIncomplete, Reason: protocol.ReasonIdleTimeout}, false
		}
	}
}

// emitter is the rollout's Output: it turns a model's stream into items and Sink events. One
// Event value is reused for every event (see Sink.Event). The text and arguments it accrues
// are counted in the rollout's memory budget (acc) before they are taken.
type emitter struct {
	r     *Rollout
	ev    protocol.Event
	part  protocol.ContentPart
	item  protocol.Item // scratch for the events' item
	open  int           // index in r.output of the open item, -1 when none
	text  strings.Builder
	first int     // len(r.output) when the step began
	err   error   // the sink's error: the consumer is gone
	acc   accrual // the step's output in Config.Budget (accrue.go)
}

func (m *emitter) reset() {
	m.open = -1
	m.first = len(m.r.output)
	m.err = nil
}

func (m *emitter) check() error {
	if m.err != nil {
		return m.err
	}
	if m.acc.over != nil {
		return m.acc.over // the step has failed: a backend that goes on is told again
	}
	if err := m.r.stepCtx.Err(); err != nil {
		if c := context.Cause(m.r.stepCtx); c != nil {
			return c
		}
		return err
	}
	return nil
}

func (m *emitter) send() error {
	m.r.sinkMu.Lock()
	m.r.sinkCalls++
	err := m.r.cfg.Sink.Event(&m.ev)
	m.r.sinkMu.Unlock()
	if err != nil {
		m.err = fmt.Errorf("sampler: sink: %w", err)
		return m.err
	}
	return nil
}

func (m *emitter) newID(prefix string) string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], m.r.rng.Uint64())
	binary.LittleEndian.PutUint64(b[8:], m.r.rng.Uint64())
	buf := make([]byte, len(prefix)+32)
	copy(buf, prefix)
	hex.Encode(buf[len(prefix):], b[:])
	return string(buf)
}

// Text implements Output.
func (m *emitter) Text(delta string) error {
	if err := m.check(); err != nil {
		return err
	}
	if m.open < 0 || m.r.output[m.open].Type != protocol.ItemMessage {
		if err := m.closeOpen(protocol.StatusCompleted, false); err != nil {
			return err
		}
		m.r.output = append(m.r.output, protocol.Item{Type: protocol.ItemMessage, ID: m.newID("msg_"),
			Status: protocol.StatusInProgress, Role: protocol.RoleAssistant})
		m.open = len(m.r.output) - 1
		m.text.Reset()
		m.item = m.r.output[m.open]
		m.item.Content = nil
		m.ev = protocol.OutputItemAdded(m.open, &m.item)
		if err := m.send(); err != nil {
			return err
		}
		m.part = protocol.ContentPart{Type: protocol.PartOutputText}
		m.ev = protocol.ContentPartAdded(m.open, 0, m.item.ID, &m.part)
		if err := m.send(); err != nil {
			return err
		}
	}
	if delta == "" {
		return nil
	}
	if err := m.acc.add(len(delta)); err != nil {
		return err
	}
	m.text.WriteString(delta)
	m.ev = protocol.OutputTextDelta(m.open, 0, m.r.output[m.open].ID, delta)
	return m.send()
}

// Call implements Output.
func (m *emitter) Call(name, callID string) error {
	if err := m.check(); err != nil {
		return err
	}
	if err := m.closeOpen(protocol.StatusCompleted, false); err != nil {
		return err
	}
	if _, used := m.r.callIDs[callID]; used || callID == "" {
		callID = m.newID("call_")
	}
	m.r.callIDs[callID] = struct{}{}
	m.r.output = append(m.r.output, protocol.Item{Type: protocol.ItemFunctionCall, ID: m.newID("fc_"),
		Status: protocol.StatusInProgress, CallID: callID, Name: name})
	m.open = len(m.r.output) - 1
	m.text.Reset()
	m.item = m.r.output[m.open]
	m.ev = protocol.OutputItemAdded(m.open, &m.item)
	return m.send()
}

// Arguments implements Output.
func (m *emitter) Arguments(delta string) error {
	if err := m.check(); err != nil {
		return err
	}
	if m.open < 0 || m.r.output[m.open].Type != protocol.ItemFunctionCall {
		return ErrNoCall
	}
	if delta == "" {
		return nil
	}
	if err := m.acc.add(len(delta)); err != nil {
		return err
	}
	m.text.WriteString(delta)
	m.ev = protocol.ArgumentsDelta(m.open, m.r.output[m.open].ID, delta)
	return m.send()
}

// close closes the open item at the end of a step; quiet closes it without events.
func (m *emitter) close(status string, quiet bool) {
	_ = m.closeOpen(status, quiet)
}

// closeOpen finishes the open item with status: it fills in the text or arguments and sends
// output_text.done + content_part.done or function_call_arguments.done, then output_item.done.
func (m *emitter) closeOpen(status string, quiet bool) error {
	if m.open < 0 {
		return nil
	}
	idx := m.open
	m.open = -1
	it := &m.r.output[idx]
	it.Status = status
	text := m.text.String()
	switch it.Type {
	case protocol.ItemMessage:
		it.Content = []protocol.ContentPart{{Type: protocol.PartOutputText, Text: text}}
		if quiet {
			return nil
		}
		m.ev = protocol.OutputTextDone(idx, 0, it.ID, text)
		if err := m.send(); err != nil {
			return err
		}
		m.part = it.Content[0]
		m.ev = protocol.ContentPartDone(idx, 0, it.ID, &m.part)
		if err := m.send(); err != nil {
			return err
		}
	case protocol.ItemFunctionCall:
		it.Arguments = text
		if quiet {
			return nil
		}
		m.ev = protocol.ArgumentsDone(idx, it.ID, it.Name, text)
		if err := m.send(); err != nil {
			return err
		}
	}
	if quiet {
		return nil
	}
	m.item = *it
	m.ev = protocol.OutputItemDone(idx, &m.item)
	return m.send()
}

func (r *Rollout) sinkStarted() {
	r.sinkMu.Lock()
	r.sinkCalls++
	r.cfg.Sink.Started()
	r.sinkMu.Unlock()
}

func (r *Rollout) setInStep(v bool) {
	r.sinkMu.Lock()
	r.inStep = v
	r.sinkMu.Unlock()
}

// KeepAlive asks the rollout's Sink for a keepalive event (KeepAliver) when a sampling step
// runs and the Sink has been called for nothing since interval before now. The caller polls
// it (the session, a few times per interval); a poll that finds a Sink call in progress, or
// new calls since the last poll, sends nothing. Safe for concurrent use; it reports whether
// the sink sent one.
func (r *Rollout) KeepAlive(now time.Time, interval time.Duration) bool {
	if !r.sinkMu.TryLock() {
		return false
	}
	defer r.sinkMu.Unlock()
	if !r.keepAliveDueLocked(now, interval) {
		return false
	}
	r.quietFrom = now
	return r.hooks.keep.KeepAlive()
}

// KeepAliveDue reports whether a KeepAlive(now, interval) would ask the Sink for a keepalive:
// a sampling step runs, the Sink has a KeepAliver, and it has been called for nothing since
// interval before now. It keeps the same count of quiet time as KeepAlive (a poll that finds
// new Sink calls starts the quiet time again), but never calls the Sink and never waits (a
// Sink call in progress: false), so a poller can run it on its own timer goroutine and start
// a writer for KeepAlive only when one is due. Safe for concurrent use.
func (r *Rollout) KeepAliveDue(now time.Time, interval time.Duration) bool {
	if !r.sinkMu.TryLock() {
		return false
	}
	defer r.sinkMu.Unlock()
	return r.keepAliveDueLocked(now, interval)
}

// keepAliveDueLocked is KeepAliveDue with sinkMu held.
func (r *Rollout) keepAliveDueLocked(now time.Time, interval time.Duration) bool {
	if r.sinkCalls != r.seenCalls || r.quietFrom.IsZero() {
		r.seenCalls, r.quietFrom = r.sinkCalls, now
		return false
	}
	return r.inStep && r.hooks.keep != nil && now.Sub(r.quietFrom) >= interval
}
