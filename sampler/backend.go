package sampler

import (
	"fmt"
	"runtime/debug"

	"github.com/tetherd/tether/protocol"
)

// This file is the rollout's side of the Model seam: the context it feeds the model session,
// and the calls into the backend, each guarded so that a panicking backend ends only its
// rollout (failed, server_error) and never the server.

// appendItems adds items to the rollout's context and records their call_ids.
func (r *Rollout) appendItems(items []protocol.Item) {
	for i := range items {
		if items[i].Type == protocol.ItemFunctionCall {
			r.callIDs[items[i].CallID] = struct{}{}
		}
	}
	r.items = append(r.items, items...)
}

// hasCall reports whether a function_call with callID is in the rollout's context.
func (r *Rollout) hasCall(callID string) bool {
	_, ok := r.callIDs[callID]
	return ok
}

// context returns the rollout's items: shared, append-only, read-only.
func (r *Rollout) context() []protocol.Item { return r.items[:len(r.items):len(r.items)] }

// open opens the model session on first use.
func (r *Rollout) open() (err error) {
	if r.ms != nil {
		return nil
	}
	defer recoverPanic(&err)
	info := RolloutInfo{ID: r.cfg.ID, ConnID: r.cfg.ConnID, Lane: r.cfg.Lane, Settings: &r.cfg.Settings, Budget: r.cfg.Budget}
	var ms ModelSession
	if r.reopen {
		// A parked rollout: the backend resumes its session from the parked state.
		state := r.modelState
		r.reopen, r.modelState = false, nil
		ms, err = r.cfg.Model.(Unparker).Unpark(r.ctx, info, state, r.items[:r.fed:r.fed])
		if err != nil {
			return fmt.Errorf("unpark: %w", err)
		}
	} else if ms, err = r.cfg.Model.Open(r.ctx, info); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if ms == nil {
		return fmt.Errorf("open: the backend returned no session")
	}
	r.ms = ms
	return nil
}

// prefill opens the model session and gives it the context so far without sampling.
func (r *Rollout) prefill() (err error) {
	if err := r.open(); err != nil {
		return err
	}
	defer recoverPanic(&err)
	in := r.items[r.fed:len(r.items):len(r.items)]
	r.fed = len(r.items)
	return r.ms.Prefill(r.ctx, in)
}

// sampleModel runs one step of the model session.
func (r *Rollout) sampleModel(step *Step) (res StepResult, err error) {
	defer recoverPanic(&err)
	return r.ms.Sample(r.stepCtx, step, &r.emit)
}

// closeModel closes the model session; a panic in Close is reported, not propagated.
func (r *Rollout) closeModel() (err error) {
	defer recoverPanic(&err)
	ms := r.ms
	r.ms = nil
	ms.Close()
	return nil
}

// failed is the ending of a rollout whose model failed with err: code server_error, or the
// code and message of a *protocol.Error the backend returned.
func failed(err error, step protocol.Usage) Ending {
	msg := "The model failed to generate a response: " + err.Error()
	code := protocol.CodeServerError
	if _, ok := err.(*PanicError); ok {
		msg = "The model backend failed with an internal error (logged by the server)."
	} else if e, ok := protocol.AsError(err); ok {
		code, msg = e.Code, e.Message // a backend's client-caused failure (e.g. an upstream 400)
	}
	return Ending{Status: protocol.ResponseFailed, StepUsage: step, Err: err,
		Error: &protocol.ResponseError{Code: code, Message: msg}}
}

// PanicError is the Ending.Err of a rollout whose backend panicked in Open, Prefill, Sample or
// Close: the panic's value and the goroutine's stack at the panic. The rollout ends failed
// (server_error, with a message that does not reveal the value); the session logs the stack.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("sampler: model backend panicked: %v", e.Value)
}

// recoverPanic turns a panic of the deferring function into a *PanicError in *err.
func recoverPanic(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}
