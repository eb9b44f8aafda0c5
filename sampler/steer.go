package sampler

import (
	"context"
	"errors"

	"github.com/tetherd/tether/protocol"
)

// Steering: a client adds user input to a response while it samples. The
// rollout interrupts the sampling step, ends the response it was sampling (SteerSink.Steered)
// and samples on with the input appended, as a successor response. A steer that finds the step
// already ended at tool calls waits for their outputs (SteerSink.SteerPending) and follows them
// on the next Resume.

// Steer is one response.steer taken by a rollout.
type Steer struct {
	// ID is the steer's id ("steer_…"), echoed by the steer events.
	ID string
	// PreviousResponseID is the response the steer was sent for.
	PreviousResponseID string
	// Input is what the steer adds to the context: user messages.
	Input []protocol.Item
}

// MaxPendingSteers bounds the steers one rollout holds before it applies them; one more gets
// ErrTooManySteers (too_many_pending_steers).
const MaxPendingSteers = 4

var (
	// ErrTooManySteers is returned by Rollout.Steer past MaxPendingSteers.
	ErrTooManySteers = errors.New("sampler: too many pending steers")
	// errSteered is the cause of a sampling step's context cut short by a steer.
	errSteered = errors.New("sampler: step interrupted by a steer")
)

// Steerable is an optional interface of a Model: CanSteer reports that the model continues a
// step its context ended (for a steer) from the items it streamed, plus the steer's input in
// the next Step. The sim can; a backend that cannot answers response.steer with
// steering_not_supported.
type Steerable interface {
	CanSteer() bool
}

// CanSteer reports whether m takes steers (Steerable).
func CanSteer(m Model) bool {
	s, ok := m.(Steerable)
	return ok && s.CanSteer()
}

// SteerSink is an optional interface of a Sink, for rollouts that take steers. Its methods are
// called from the rollout's goroutine, like the Sink's.
type SteerSink interface {
	// SteerAccepted is called when the rollout takes s, before Steered or SteerPending.
	SteerAccepted(s Steer)
	// Steered ends the response being sampled for the steers st.Steers; the rollout then
	// samples on with their input appended (a successor response).
	Steered(st Steering)
	// SteerPending is called right after Suspended, or while suspended, for steers that wait
	// for the outputs of the pending calls: their input follows those outputs on the next
	// Resume.
	SteerPending(steers []Steer, pendingCallIDs []string)
}

// Steering describes a response ended by steers.
type Steering struct {
	Steers []Steer
	// Output is the model items since the previous suspension or steering: the ended
	// response's output. An item cut short has status incomplete.
	Output []protocol.Item
	// StepUsage is the usage of the interrupted step; Usage is cumulative over the rollout.
	StepUsage, Usage protocol.Usage
	// Context is every item of the rollout's context so far (read-only), Output included.
	Context []protocol.Item
}

// Steer hands s to the rollout. A sampling step is interrupted at once; a
// rollout waiting for its ticket applies s before its next step; a suspended one holds it for
// the next Resume. It returns ErrTooManySteers past MaxPendingSteers, ErrEnded once the
// rollout has ended and ErrParked once it has parked (steer the Rollout that Unpark returns). The caller checks that the model can steer (CanSteer).
func (r *Rollout) Steer(s Steer) error {
	r.steerMu.Lock()
	if r.steerClosed {
		parked := r.steerParked
		r.steerMu.Unlock()
		if parked {
			return ErrParked
		}
		return ErrEnded
	}
	if len(r.steers)+r.heldSteers >= MaxPendingSteers {
		r.steerMu.Unlock()
		return ErrTooManySteers
	}
	r.steers = append(r.steers, s)
	cut := r.stepCancel
	r.steerMu.Unlock()
	if cut != nil {
		cut(errSteered)
	}
	select {
	case r.steerWake <- struct{}{}:
	default:
	}
	return nil
}

// takeSteers returns the steers handed over since the last call.
func (r *Rollout) takeSteers() []Steer {
	r.steerMu.Lock()
	defer r.steerMu.Unlock()
	s := r.steers
	r.steers = nil
	return s
}

// closeSteers refuses steers from now on (the rollout ends).
func (r *Rollout) closeSteers() {
	r.steerMu.Lock()
	r.steerClosed = true
	r.steerMu.Unlock()
}

// stepContext returns the context of a sampling step: r.ctx, also cut short by Steer.
func (r *Rollout) stepContext() (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(r.ctx)
	r.steerMu.Lock()
	r.stepCancel = cancel
	r.steerMu.Unlock()
	return ctx, cancel
}

// endStep stops Steer from interrupting the step that ended, and reports whether a steer did.
func (r *Rollout) endStep(ctx context.Context, cancel context.CancelCauseFunc) (steered bool) {
	r.steerMu.Lock()
	r.stepCancel = nil
	r.steerMu.Unlock()
	steered = errors.Is(context.Cause(ctx), errSteered) && r.ctx.Err() == nil
	cancel(nil)
	return steered
}

// steerSink returns the Sink's SteerSink (Wrapper), or nil.
func (r *Rollout) steerSink() SteerSink { return r.hooks.steer }

// acceptSteers tells the sink of steers taken and returns them.
func (r *Rollout) acceptSteers(steers []Steer) {
	ss := r.steerSink()
	for _, s := range steers {
		r.sinkCall(func() { ss.SteerAccepted(s) })
	}
}

// applyBeforeStep takes the steers that arrived while the rollout waited for its ticket: their
// input joins the step about to begin (nothing was sampled for this response yet).
func (r *Rollout) applyBeforeStep() {
	steers := r.takeSteers()
	if len(steers) == 0 || r.steerSink() == nil {
		return
	}
	r.acceptSteers(steers)
	for _, s := range steers {
		r.appendItems(s.Input)
	}
}

// applyAfterStep handles the steers taken during the step that just ended. Without pending
// calls the response ends steered and the rollout samples on (true); with pending calls the
// steers are held for the next Resume (false: the rollout suspends).
func (r *Rollout) applyAfterStep(cut bool) (again bool) {
	steers := r.takeSteers()
	ss := r.steerSink()
	if len(steers) == 0 || ss == nil {
		return false
	}
	r.acceptSteers(steers)
	if len(r.pending) > 0 {
		r.hold(steers)
		return false
	}
	st := Steering{Steers: steers, Output: r.output[r.suspendAt:len(r.output):len(r.output)],
		StepUsage: r.stepUsage, Usage: r.usage, Context: r.context()}
	r.suspendAt = len(r.output)
	r.sinkCall(func() {
		for _, o := range r.hooks.steered { // ss among them
			o.Steered(st)
		}
	})
	r.stepUsage = protocol.Usage{}
	for _, s := range steers {
		r.appendItems(s.Input)
	}
	return true
}

// hold keeps steers for the next Resume.
func (r *Rollout) hold(steers []Steer) {
	r.held = append(r.held, steers...)
	r.steerMu.Lock()
	r.heldSteers = len(r.held)
	r.steerMu.Unlock()
}

// announceHeld sends SteerPending for the held steers not yet announced (after Suspended).
func (r *Rollout) announceHeld(pending []string) {
	ss := r.steerSink()
	if ss == nil || r.announced >= len(r.held) {
		return
	}
	steers := r.held[r.announced:]
	r.announced = len(r.held)
	r.sinkCall(func() { ss.SteerPending(steers, pending) })
}

// steerWhileSuspended takes steers that arrive while the rollout is suspended: they wait for
// the pending calls' outputs.
func (r *Rollout) steerWhileSuspended(pending []string) {
	steers := r.takeSteers()
	if len(steers) == 0 || r.steerSink() == nil {
		return
	}
	r.acceptSteers(steers)
	r.hold(steers)
	r.announceHeld(pending)
}

// releaseHeld appends the held steers' input (after a Resume's outputs) and forgets them.
func (r *Rollout) releaseHeld() {
	for _, s := range r.held {
		r.appendItems(s.Input)
	}
	r.held, r.announced = nil, 0
	r.steerMu.Lock()
	r.heldSteers = 0
	r.steerMu.Unlock()
}

// sinkCall runs f under sinkMu, like every Sink call.
func (r *Rollout) sinkCall(f func()) {
	r.sinkMu.Lock()
	r.sinkCalls++
	f()
	r.sinkMu.Unlock()
}
