package sim

import (
	"context"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// request is one sampling step as the sim sees it.
type request struct {
	Settings *sampler.Settings
	// Context is the rendered context of the step (read-only during the step).
	Context *Context
	// Cached is the number of leading tokens of Context already in the sim's state.
	Cached int
	// Step is the step's index in the rollout; Calls the function calls made before it.
	Step  int
	Calls int
}

// session is one rollout's sim state: the rollout's context rendered into o200k_base tokens,
// appended to as items arrive, and how many of its tokens the "model" holds.
type session struct {
	sim      *Sim
	settings *sampler.Settings
	context  *Context
	// prefilled is the number of leading tokens of context in the model's state: 0 for a new
	// rollout (the cold path), the warm-up's context after Prefill, everything up to the end
	// of the previous step's output after a step.
	prefilled int
}

// Open implements sampler.Model. The session renders the instructions at once; items are
// rendered as Prefill and Sample receive them, each only once.
func (s *Sim) Open(_ context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	return &session{sim: s, settings: info.Settings, context: NewContext(info.Settings)}, nil
}

// Prefill implements sampler.ModelSession: the input is rendered and counts as in the model's
// state (a warm-up's tokens are cached for the next step).
func (ss *session) Prefill(_ context.Context, input []protocol.Item) error {
	ss.context.Append(input...)
	ss.prefilled = ss.context.Len()
	return nil
}

// Sample implements sampler.ModelSession. The previous step's output is in the model's state
// (it generated it); the step's input is prefilled. Usage: input_tokens is the whole context,
// cached_tokens what was in the model's state before the input.
func (ss *session) Sample(ctx context.Context, step *sampler.Step, out sampler.Output) (sampler.StepResult, error) {
	if len(step.Output) > 0 {
		ss.context.Append(step.Output...)
		ss.prefilled = ss.context.Len()
	}
	ss.context.Append(step.Input...)
	req := request{Settings: ss.settings, Context: ss.context, Cached: ss.prefilled, Step: step.Index, Calls: step.Calls}
	res, err := ss.sim.sample(ctx, &req, out)
	ss.prefilled = ss.context.Len()
	return res, err
}

// Close implements sampler.ModelSession; the sim holds nothing outside the session.
func (ss *session) Close() {}
