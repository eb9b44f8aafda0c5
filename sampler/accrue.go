package sampler

// This file is the rollout's count of a sampling step's output in the server's memory budget
// (Config.Budget), for every backend: the text and arguments a step accrues live in the
// rollout's items (the emitter's builder) until the step ends, however the backend produced
// them, so the rollout counts them where they accrue, in one place.

// AccrueChunk is the unit, in bytes of budget, in which a rollout reserves its step's
// accruing output: a step touches the server-wide counter once per AccrueChunk / AccrueFactor
// bytes of text and arguments (8 KiB), not once per delta, and holds less than one chunk more
// than its output costs. A step's first chunk is counted whether it fits or not (Budget.Grow),
// as a connection's only queued frame is written over a full budget: a step that produces
// little (a tool call, a short answer) is never failed for the memory others hold once it
// runs, and what the budget passes its bound by is one chunk per step sampling. The chunks
// after it must fit.
const AccrueChunk = 16 << 10

// accrual is what a step's output holds of Config.Budget: the emitter's part of the rollout.
type accrual struct {
	budget Budget // Config.Budget; nil: nothing is counted
	bytes  int64  // of text and arguments accrued in the step
	held   int64  // reserved in budget: whole AccrueChunks, at least AccrueFactor·bytes
	// over is the error of the reservation that did not fit: the step fails with it, whatever
	// the backend returns.
	over *MemoryError
}

// add counts n more bytes of the step's text or arguments, reserving whole AccrueChunks as
// they are needed (the first counted whether it fits or not). When they do not fit, nothing of
// them is counted, and the *MemoryError that the step fails with is returned (and kept in
// over).
func (a *accrual) add(n int) error {
	if a.budget == nil {
		return nil
	}
	need := (a.bytes + int64(n)) * AccrueFactor
	if need > a.held {
		more := (need - a.held + AccrueChunk - 1) / AccrueChunk * AccrueChunk
		switch {
		case a.held == 0 && more == AccrueChunk:
			a.budget.Grow(more) // the step's first chunk
		case !a.budget.TryReserve(more):
			a.over = &MemoryError{What: "one step's text and arguments", Held: a.bytes + int64(n)}
			return a.over
		}
		a.held += more
	}
	a.bytes += int64(n)
	return nil
}

// release gives back what the step held, once it has ended: its items are then the rollout's,
// counted by its owner (Sink.Suspended, Sink.Ended: their Output and Context). It starts the
// next step's count from 0.
func (a *accrual) release() {
	if a.held > 0 {
		a.budget.Release(a.held)
	}
	a.bytes, a.held, a.over = 0, 0, nil
}
