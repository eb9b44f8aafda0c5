package sampler

import (
	"errors"
	"fmt"
)

// OutputLimits bound what an engine streams in one sampling step: a backend wraps the step's
// Output in LimitOutput so that an upstream that never stops (or sends one enormous delta) is
// held to the step's max_output_tokens and to byte bounds, as a client is. Zero fields are no
// bound.
type OutputLimits struct {
	// MaxTokens is the step's max_output_tokens (Settings.MaxOutputTokens).
	MaxTokens int
	// MaxBytes bounds the bytes of text and tool-call arguments of the step.
	MaxBytes int
	// MaxArgumentBytes bounds the bytes of one call's arguments.
	MaxArgumentBytes int
}

// MaxTokenBytes is the longest token, in bytes, that LimitOutput assumes an engine's vocabulary
// has: o200k_base's longest is 128 bytes (a run of spaces); this leaves room for vocabularies
// with longer ones.
const MaxTokenBytes = 256

// ErrMaxOutputTokens is returned by a LimitedOutput's Text and Arguments when the engine has
// streamed more than the step's max_output_tokens: the backend stops reading and ends the step
// incomplete (StepResult.Incomplete = protocol.ReasonMaxOutputTokens).
var ErrMaxOutputTokens = errors.New("sampler: the engine streamed more than max_output_tokens")

// LimitError is returned by a LimitedOutput's Text and Arguments when the engine streamed more
// bytes than OutputLimits allow: the step fails (server_error); the message names the bound.
type LimitError struct {
	What  string // "one tool call's arguments" or "one step's text and arguments"
	Limit int    // the bound, in bytes
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the upstream engine streamed more than %s in %s", sizeString(e.Limit), e.What)
}

// sizeString writes n bytes in the largest binary unit that divides it.
func sizeString(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// LimitedOutput is an Output that passes each delta on while the step stays within its
// OutputLimits. It counts a lower bound of the tokens streamed, the larger of the number of
// non-empty deltas (an engine streams whole tokens, one or more per delta) and the bytes over
// MaxTokenBytes, so a well-behaved engine, which stops at max_output_tokens itself, is never
// cut. A delta that would pass a bound is not passed on. It is not safe for concurrent use.
type LimitedOutput struct {
	out    Output
	lim    OutputLimits
	deltas int // non-empty Text and Arguments deltas
	bytes  int // of text and arguments
	args   int // bytes of the open call's arguments
}

// LimitOutput returns out held to lim.
func LimitOutput(out Output, lim OutputLimits) *LimitedOutput {
	return &LimitedOutput{out: out, lim: lim}
}

// Tokens returns the lower bound of the tokens streamed so far (see LimitedOutput).
func (o *LimitedOutput) Tokens() int {
	return max(o.deltas, (o.bytes+MaxTokenBytes-1)/MaxTokenBytes)
}

// Text implements Output.
func (o *LimitedOutput) Text(delta string) error {
	if err := o.count(delta, false); err != nil {
		return err
	}
	return o.out.Text(delta)
}

// Call implements Output: a new call's arguments start from 0 bytes.
func (o *LimitedOutput) Call(name, callID string) error {
	o.args = 0
	return o.out.Call(name, callID)
}

// Arguments implements Output.
func (o *LimitedOutput) Arguments(delta string) error {
	if err := o.count(delta, true); err != nil {
		return err
	}
	return o.out.Arguments(delta)
}

// count adds delta to the step's counts, or returns the bound it would pass (counting
// nothing).
func (o *LimitedOutput) count(delta string, args bool) error {
	if delta == "" {
		return nil
	}
	n := len(delta)
	if args && o.lim.MaxArgumentBytes > 0 && o.args+n > o.lim.MaxArgumentBytes {
		return &LimitError{What: "one tool call's arguments", Limit: o.lim.MaxArgumentBytes}
	}
	if o.lim.MaxBytes > 0 && o.bytes+n > o.lim.MaxBytes {
		return &LimitError{What: "one step's text and arguments", Limit: o.lim.MaxBytes}
	}
	if m := o.lim.MaxTokens; m > 0 && max(o.deltas+1, (o.bytes+n+MaxTokenBytes-1)/MaxTokenBytes) > m {
		return ErrMaxOutputTokens
	}
	o.deltas++
	o.bytes += n
	if args {
		o.args += n
	}
	return nil
}
