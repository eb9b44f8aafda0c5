package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxTurns is RunOptions.MaxTurns when it is 0.
const DefaultMaxTurns = 64

// ToolFunc runs one function call and returns its output. An error is reported to the model as
// the output "error: " + err.Error(). It must return when ctx is done (the per-call timeout).
type ToolFunc func(ctx context.Context, call Call) (string, error)

// RunOptions configure Run. The zero value has no tools: every call gets an unknown-tool error
// output.
type RunOptions struct {
	// Tools maps a function name to its handler.
	Tools map[string]ToolFunc
	// CallTimeout bounds each call's ctx; 0 means no limit beyond Run's ctx.
	CallTimeout time.Duration
	// MaxTurns is the most suspensions Run answers; one more cancels the rollout and returns
	// ErrMaxTurns. 0 means DefaultMaxTurns.
	MaxTurns int
	// OnEvent, if set, sees every event of the rollout, in order, on Run's goroutine.
	OnEvent func(Event)
}

// Run starts a rollout from req and runs it to its end: at each suspension it runs the pending
// calls concurrently with opts.Tools and appends their outputs. It returns the final Response
// (whatever its status: completed, incomplete or failed), or the first error (ErrClosed after
// Close).
func (c *Conn) Run(ctx context.Context, req CreateRequest, opts RunOptions) (*Response, error) {
	r, err := c.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, opts)
}

// Run runs a started rollout to its end, as Conn.Run does. On a rollout that has ended it
// returns the final Response, or, when an error ended it (which an earlier Events returned),
// ErrEnded; ErrClosed after Conn.Close unless it has a final Response.
func (r *Rollout) Run(ctx context.Context, opts RunOptions) (*Response, error) {
	maxTurns := opts.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	for turns := 0; ; turns++ {
		if err := r.drain(ctx, opts.OnEvent); err != nil {
			return nil, err
		}
		if resp := r.Response(); resp != nil {
			return resp, nil
		}
		s := r.Suspension()
		if s == nil {
			// Ended without a final Response: the error that ended it was returned by an
			// earlier Events.
			if r.c.closed.Load() {
				return nil, ErrClosed
			}
			return nil, ErrEnded
		}
		if turns == maxTurns {
			return r.stop(ctx, opts.OnEvent)
		}
		if err := r.Append(ctx, runCalls(ctx, s.Calls, opts)...); err != nil {
			return nil, err
		}
	}
}

// drain reads the events up to the next suspension or the end.
func (r *Rollout) drain(ctx context.Context, onEvent func(Event)) error {
	for ev, err := range r.Events(ctx) {
		if err != nil {
			return err
		}
		if onEvent != nil {
			onEvent(ev)
		}
	}
	return nil
}

// stop cancels the rollout after too many turns and waits for its end.
func (r *Rollout) stop(ctx context.Context, onEvent func(Event)) (*Response, error) {
	if err := r.Cancel(ctx); err != nil {
		return nil, fmt.Errorf("%w (cancel: %w)", ErrMaxTurns, err)
	}
	if err := r.drain(ctx, onEvent); err != nil {
		return nil, fmt.Errorf("%w (cancel: %w)", ErrMaxTurns, err)
	}
	return r.Response(), ErrMaxTurns
}

// runCalls runs calls concurrently and returns their outputs in the calls' order.
func runCalls(ctx context.Context, calls []Call, opts RunOptions) []Item {
	out := make([]Item, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Go(func() { out[i] = call.Output(runCall(ctx, call, opts)) })
	}
	wg.Wait()
	return out
}

// runCall runs one call with its timeout; errors become the output.
func runCall(ctx context.Context, call Call, opts RunOptions) string {
	fn := opts.Tools[call.Name]
	if fn == nil {
		return fmt.Sprintf("error: %v: %q", ErrUnknownTool, call.Name)
	}
	if opts.CallTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.CallTimeout)
		defer cancel()
	}
	s, err := fn(ctx, call)
	if err != nil {
		return "error: " + err.Error()
	}
	return s
}
