package sampler

import "time"

// Request is what a Model samples from: one sampling step of a rollout (architecture §5).
type Request struct {
	// Settings of the rollout. Read-only.
	Settings *Settings
	// Context is the rendered context: every item the model sees, and its tokens. Read-only;
	// it does not change during Sample.
	Context *Context
	// Cached is the number of leading tokens of Context already in the model's state (prefilled
	// by earlier steps, or by a warm-up); Context.Len()-Cached tokens must be prefilled.
	Cached int
	// Step is the index of this sampling step in the rollout, from 0.
	Step int
	// Calls is the number of function calls the rollout has made before this step.
	Calls int
}

// Output is where a Model streams one step's output. The rollout turns it into items and
// events: Text opens an assistant message (closing an open call), Call opens a function_call
// (closing an open message or call), Arguments extends the open call. Ids and call_ids are
// assigned by the rollout.
//
// Every method returns a non-nil error when the rollout was cancelled, its context ended or its
// consumer is gone; the model must then return at once (with that error or any other).
type Output interface {
	// Text streams a fragment of the assistant message's text.
	Text(delta string) error
	// Call starts a function call of the named tool.
	Call(name string) error
	// Arguments streams a fragment of the open call's JSON arguments. Without an open call it
	// returns ErrNoCall.
	Arguments(delta string) error
}

// StepResult reports how a sampling step ended when Sample returns without error.
type StepResult struct {
	// OutputTokens is the number of tokens the model generated (usage output_tokens).
	OutputTokens int
	// Incomplete is the reason the step stopped early, e.g. protocol.ReasonMaxOutputTokens;
	// empty when the model finished on its own. A non-empty reason ends the rollout with
	// status incomplete.
	Incomplete string
	// ModelTime is the engine time the step took per its cost model, whether or not it was
	// spent in real time (the bench reads it; see SimOptions.Realtime).
	ModelTime time.Duration
}
