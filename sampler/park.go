package sampler

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tetherd/tether/protocol"
)

// This file parks a suspended rollout: its goroutine ends and its whole state becomes one
// ParkedRollout value, from which Unpark continues it, hot, in a new goroutine.

// ParkableSession is an optional interface of a ModelSession: Park returns the session's
// state in the form its Model's Unparker resumes from (the sim: its rendered tokens). The
// session stays usable (a park may still lose to a Resume), and is closed right after a
// park that succeeds. A session without it cannot be parked: its rollout stays live while
// suspended.
type ParkableSession interface {
	Park() ([]byte, error)
}

// Unparker is an optional interface of a Model: Unpark reopens a session from the state its
// ParkableSession.Park returned, without taking the context in again. fed is the context the
// session had been given when it parked (Step.Context up to the end of its last step's input,
// read-only): the items that state was built from. An error ends the rollout failed, like an
// error of Open. A Model without it cannot park its rollouts.
type Unparker interface {
	Unpark(ctx context.Context, info RolloutInfo, state []byte, fed []protocol.Item) (ModelSession, error)
}

// ParkedDropper is an optional interface of an Unparker: DropParked releases what a parked
// session's state holds outside Tether's memory (the chat backend: the engine slot file its KV
// was saved to) when the rollout of Response id ends without reopening the session from it:
// cancelled, timed out or closed while parked, or unparked and ended before its next step.
// It is called at most once per state, from the rollout's goroutine, never for a state that
// was handed on (parked again, or to the shared store). It must not block for long.
type ParkedDropper interface {
	DropParked(id string, state []byte)
}

// ParkSink is an optional interface of a Sink: a rollout can park only when its Sink has it.
// Parked is called instead of Ended, last, from the rollout's goroutine, when the rollout
// parks; the Sink then owns p (hand it to Unpark to continue the rollout, once).
type ParkSink interface {
	Parked(p *ParkedRollout)
}

// ParkedRollout is the whole state of a parked rollout: what a new goroutine needs to continue it
// where it suspended. It holds no pointer into the server (no Model, Sink or Ticket) and
// encodes to JSON and back. Unpark takes ownership of it: it must not be changed or unparked
// twice.
type ParkedRollout struct {
	ID              string   `json:"id"`
	Lane            string   `json:"lane,omitempty"`
	Settings        Settings `json:"settings"`
	SuspendOnAnswer bool     `json:"suspend_on_answer,omitempty"`
	// Context is every item of the rollout's context in order; Output every model item
	// (OutputIndex order); Output[SuspendAt:] is empty (the suspension reported them).
	Context   []protocol.Item `json:"context"`
	Output    []protocol.Item `json:"output"`
	SuspendAt int             `json:"suspend_at"`
	// Fed is how many items of Context the model session was given; the StepOut items after
	// them are its last step's output, the rest the input since.
	Fed     int `json:"fed"`
	StepOut int `json:"step_out"`
	// Pending are the call_ids the next Resume must answer, in output order.
	Pending []string       `json:"pending"`
	Steps   int            `json:"steps"` // sampling steps begun
	Calls   int            `json:"calls"` // function calls made
	Usage   protocol.Usage `json:"usage"` // cumulative
	Started bool           `json:"started"`
	// Deadline is when the suspension times out (Config.SuspendTimeout); zero: never.
	Deadline time.Time `json:"deadline"`
	// Opened: the model session was opened and Model is its ParkableSession state.
	Opened bool   `json:"opened"`
	Model  []byte `json:"model,omitempty"`
}

// ContextItems returns p's context, read-only.
func (p *ParkedRollout) ContextItems() []protocol.Item {
	return p.Context[:len(p.Context):len(p.Context)]
}

// Park asks a suspended rollout to park: its goroutine hands its state to the Sink's
// ParkSink.Parked as a ParkedRollout value and ends, without Sink.Ended. It does not wait: the
// rollout parks unless a Resume, a Cancel, its suspend timeout or a steer gets to it first,
// or its model session cannot park (ParkableSession), in which case it stays as it is.
// Errors: ErrNotSuspended when the rollout is not suspended, ErrNotParkable when its Sink
// or Model cannot park.
func (r *Rollout) Park() error {
	if r.State() != Suspended {
		return ErrNotSuspended
	}
	if !r.canPark() {
		return ErrNotParkable
	}
	select {
	case r.parkWake <- struct{}{}:
	default:
	}
	return nil
}

// CanPark reports whether rollouts of m with a Sink that has ParkSink can park (m has
// Unparker; its sessions must also be ParkableSession).
func CanPark(m Model) bool {
	_, ok := m.(Unparker)
	return ok
}

// canPark reports whether the rollout's Sink and Model can park (the session is checked when
// it parks). Safe from any goroutine.
func (r *Rollout) canPark() bool {
	return r.hooks.park != nil && CanPark(r.cfg.Model)
}

// tryPark parks the suspended rollout (see Park) and reports whether it did. Run on the
// rollout's goroutine: the one owner of its state, so a Resume, a Cancel or the suspend
// timer either comes first (the rollout stays live) or finds it parked.
func (r *Rollout) tryPark(pending []string) bool {
	if r.ctx.Err() != nil || !r.canPark() {
		return false
	}
	// A rollout unparked that has not sampled since has not reopened its session: its
	// parked state is still the session's.
	state, opened := r.modelState, r.reopen
	if r.ms != nil {
		opened = true
		ps, ok := r.ms.(ParkableSession)
		if !ok {
			return false
		}
		var err error
		if state, err = parkModel(ps); err != nil {
			return false // the backend cannot park now: stay live
		}
	}
	r.steerMu.Lock()
	defer r.steerMu.Unlock()
	if len(r.steers) > 0 || len(r.held) > 0 {
		return false // steers wait for the next Resume: stay live
	}
	if !r.setState(Suspended, Parked) {
		return false // a Resume came first: its input is in the inbox
	}
	r.steerClosed, r.steerParked = true, true
	r.parkedAs = &ParkedRollout{
		ID:              r.cfg.ID,
		Lane:            r.cfg.Lane,
		Settings:        r.cfg.Settings,
		SuspendOnAnswer: r.cfg.SuspendOnAnswer,
		Context:         slices.Clip(slices.Clone(r.items)),
		Output:          slices.Clip(slices.Clone(r.output)),
		SuspendAt:       r.suspendAt,
		Fed:             r.fed,
		StepOut:         r.stepOut,
		Pending:         slices.Clone(pending),
		Steps:           r.step,
		Calls:           r.calls,
		Usage:           r.usage,
		Started:         r.started,
		Deadline:        r.deadline,
		Opened:          opened,
		Model:           state,
	}
	return true
}

// dropModelState gives the parked session state that the ending rollout never reopened to its
// Model's ParkedDropper; a panic there is the backend's and is not propagated.
func (r *Rollout) dropModelState() {
	state := r.modelState
	r.reopen, r.modelState = false, nil
	d, ok := r.cfg.Model.(ParkedDropper)
	if !ok || state == nil {
		return
	}
	var err error
	defer recoverPanic(&err)
	d.DropParked(r.cfg.ID, state)
}

// parkModel runs the session's Park; a panic is an error.
func parkModel(ps ParkableSession) (state []byte, err error) {
	defer recoverPanic(&err)
	return ps.Park()
}

// parked ends the goroutine of a rollout that parked: the model session is closed and the
// Sink gets p.
func (r *Rollout) parked(p *ParkedRollout) {
	if r.ms != nil {
		_ = r.closeModel() // a panic in Close is the backend's; the state is already taken
	}
	r.sinkMu.Lock()
	r.sinkCalls++
	r.hooks.park.Parked(p)
	r.sinkMu.Unlock()
}

// Unpark returns a Suspended rollout that continues p; its owner runs it with Run, as after
// New. With in it is resumed with in at once, as by Resume (it starts Resuming, and Unpark's
// caller waits for no goroutine): in.Input is checked against p's pending calls here, and
// refused with the *protocol.Error of CheckOutputs (400), no rollout created. cfg supplies what p does not hold: Model (which must be the Unparker that can resume
// p's model state when p.Opened), Sink, ConnID, SuspendTimeout (it times the suspensions
// after p's, p.Deadline times p's), ParkAfter; cfg.ID, Lane, Settings, SuspendOnAnswer are taken from p, and cfg.Ticket,
// History, Input and StartSuspended must be zero. The next Resume is hot: the context is not
// validated, and the model session is not rebuilt (Unparker.Unpark), again. A p whose
// Deadline has passed times out (idle_timeout) as soon as it runs. Unpark's caller hears
// Parked → Suspended (or Resuming) (StateObserver). Other errors wrap ErrBadParked.
func Unpark(ctx context.Context, cfg Config, p *ParkedRollout, in *Resume) (*Rollout, error) {
	calls, err := checkParked(cfg, p)
	if err != nil {
		return nil, err
	}
	if in != nil {
		known := func(id string) bool { _, ok := calls[id]; return ok }
		if perr := CheckOutputs(p.Pending, known, in.Input); perr != nil {
			return nil, perr
		}
	}
	cfg.ID, cfg.Lane, cfg.Settings, cfg.SuspendOnAnswer = p.ID, p.Lane, p.Settings, p.SuspendOnAnswer
	r := New(ctx, cfg)
	r.restored, r.restoredIn = p, in
	r.state.Store(int32(Parked))
	if in != nil {
		r.setState(Parked, Resuming)
	} else {
		r.setState(Parked, Suspended)
	}
	return r, nil
}

// checkParked validates p against cfg (see Unpark) and returns the call_ids of p's context.
func checkParked(cfg Config, p *ParkedRollout) (map[string]struct{}, error) {
	bad := func(format string, args ...any) (map[string]struct{}, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrBadParked}, args...)...)
	}
	switch {
	case p == nil:
		return bad("no value")
	case cfg.Model == nil || cfg.Sink == nil:
		return bad("no Model or Sink")
	case cfg.Ticket != nil || cfg.History != nil || cfg.Input != nil || cfg.StartSuspended:
		return bad("Ticket, History, Input and StartSuspended must be zero")
	case p.Fed < 0 || p.StepOut < 0 || p.Fed+p.StepOut > len(p.Context):
		return bad("fed %d + step_out %d over %d context items", p.Fed, p.StepOut, len(p.Context))
	case p.SuspendAt < 0 || p.SuspendAt > len(p.Output):
		return bad("suspend_at %d over %d output items", p.SuspendAt, len(p.Output))
	case p.Opened && !CanPark(cfg.Model):
		return bad("the model cannot resume a parked session")
	}
	calls := make(map[string]struct{})
	for i := range p.Context {
		if p.Context[i].Type == protocol.ItemFunctionCall {
			calls[p.Context[i].CallID] = struct{}{}
		}
	}
	for _, id := range p.Pending {
		if _, ok := calls[id]; !ok {
			return bad("pending call_id %q is not in the context", id)
		}
	}
	return calls, nil
}

// restore takes p's state (see Unpark) and waits, suspended, for a Resume like suspend does.
func (r *Rollout) restore(p *ParkedRollout) (Ending, bool) {
	r.appendItems(p.Context)
	r.output = p.Output
	r.suspendAt = p.SuspendAt
	r.fed, r.stepOut = p.Fed, p.StepOut
	r.pending = slices.Clone(p.Pending)
	r.step, r.calls = p.Steps, p.Calls
	r.usage = p.Usage
	r.started = p.Started
	r.deadline = p.Deadline
	r.reopen, r.modelState = p.Opened, p.Model
	if in := r.restoredIn; in != nil {
		r.restoredIn = nil
		r.appendItems(in.Input)
		r.ticket = in.Ticket
		return Ending{}, true
	}
	if !r.deadline.IsZero() && !r.deadline.After(time.Now()) {
		return Ending{Status: protocol.ResponseIncomplete, Reason: protocol.ReasonIdleTimeout}, false
	}
	return r.await(slices.Clone(p.Pending))
}
