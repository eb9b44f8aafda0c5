package compat

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// A background response while it runs, and once it has ended. While it runs its Response is
// not in the store yet, and will be once it ends: a DELETE is refused, and a continuation
// naming it is told to wait (Background.InProgress, asked by every shape's create), both with
// response_in_progress (409), rather than that it does not exist. Once it has ended, the
// store holds its terminal Response, except a failed one, which only the instance that ran it
// keeps (with its events, for Keep), and its record on a shared store. A DELETE, on any
// instance, removes the stored Response, the record and what this instance keeps, and only
// once every store call has succeeded (a failed one changes nothing); an instance that ran it
// and did not take the DELETE still keeps its events, so it asks the store (for a failed one,
// the record) before it answers from them.

// inProgress is response_in_progress (409) for a DELETE of background response id, which has
// not ended.
func inProgress(id string) *protocol.Error {
	return protocol.Errorf(http.StatusConflict, protocol.CodeResponseInProgress, "",
		"Response '%s' is still in progress: cancel it (POST /v1/responses/%s/cancel) or wait for its end, then delete it.", id, id)
}

// InProgress reports whether background response id of owner has not ended (queued or
// running), on this instance or, on a shared store, on another one (its record, unless its
// lease is past); false on a nil Background, or when the store fails. It is the
// session.Options.InProgress of a server's connections: a continuation naming such a
// response is answered response_in_progress (409) on every shape.
func (b *Background) InProgress(ctx context.Context, id, owner string) bool {
	if b == nil {
		return false
	}
	if run := b.lookup(id, owner); run != nil {
		return !run.hasEnded()
	}
	if b.Shared == nil {
		return false
	}
	rec, _, err := b.loadShared(ctx, id, owner, -1, 0)
	return err == nil && !rec.Ended && !rec.stopped(time.Now())
}

// endedRun returns the background response id of owner that this instance keeps once it has
// ended, or nil: none kept (or a nil Background), or it has not ended.
func (b *Background) endedRun(id, owner string) *bgRun {
	if run := b.lookup(id, owner); run != nil && run.hasEnded() {
		return run
	}
	return nil
}

// hasEnded reports whether run has ended: its terminal event is kept and its connection core
// closed (watch).
func (run *bgRun) hasEnded() bool {
	select {
	case <-run.done:
		return true
	default:
		return false
	}
}

// storedEnd reports whether run has ended with a Response the store took (any terminal
// status but failed): from then on the store says whether the response still exists.
func (run *bgRun) storedEnd() bool {
	if !run.hasEnded() {
		return false
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.final != nil && run.final.Status != protocol.ResponseFailed
}

// endRecorded reports whether run's terminal record was written to the shared store.
func (run *bgRun) endRecorded() bool {
	run.mu.Lock()
	defer run.mu.Unlock()
	return run.endSaved
}

// deleted reports whether run, which this instance keeps, has ended with a Response that is
// gone since (deleted here or on another instance sharing the store, or evicted): the store
// no longer has its stored Response, or, for a failed one (never stored) whose terminal record
// was written, the shared store no longer has that record. It then answers 404 and forgets
// run, or answers the store's error; false when run may be answered from what this instance
// keeps.
func (h *HTTP) deleted(w http.ResponseWriter, r *http.Request, run *bgRun) bool {
	err := h.stillThere(r.Context(), run)
	if err == nil {
		return false
	}
	if errors.Is(err, session.ErrNotFound) {
		h.Background.forget(run)
	}
	storeError(w, run.id, err)
	return true
}

// stillThere asks the store whether what run's end left there is still there: its stored
// Response, or the terminal record of a failed run on a shared store. nil when it is, or when
// there is nothing to ask (run has not ended; a failed run without a shared store, or whose
// terminal record could not be written: this instance's copy is then all there is);
// ErrNotFound when it is gone; another error when the store fails.
func (h *HTTP) stillThere(ctx context.Context, run *bgRun) error {
	switch {
	case run.storedEnd():
		if st := h.Options.Store; st != nil {
			_, err := st.Get(ctx, run.id, run.owner)
			return err
		}
	case run.hasEnded():
		if b := h.shared(); b != nil && run.endRecorded() {
			return b.recordKept(ctx, run.id, run.owner)
		}
	}
	return nil
}
