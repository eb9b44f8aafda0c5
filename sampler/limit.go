package sampler

import (
	"errors"
	"fmt"
	"io"
)

// OutputLimits bound what an engine streams in one sampling step: a backend wraps the step's
// Output in LimitOutput so that an upstream that never stops (or sends one enormous delta) is
// held to the step's max_output_tokens and to byte bounds, as a client is. Zero fields are no
// bound. (The memory the step's output takes is counted by the rollout itself, for every
// backend: see Config.Budget.)
type OutputLimits struct {
	// MaxTokens is the step's max_output_tokens (Settings.MaxOutputTokens).
	MaxTokens int
	// MaxBytes bounds the bytes of text and tool-call arguments of the step.
	MaxBytes int
	// MaxArgumentBytes bounds the bytes of one call's arguments.
	MaxArgumentBytes int
}

// Budget is the server-wide memory bound as the rollout and its backend see it
// (session.Budget implements it). The rollout reserves in it the text and arguments a
// sampling step accrues (AccrueFactor bytes per byte, in AccrueChunks) until the step ends; a
// backend reserves what else it holds of a step while it holds it (an upstream's event or
// frame being read: MeteredReader; a value built before it is streamed), so that neither a
// model nor an upstream can make the server hold more than the bound. What does not fit fails
// the step (*MemoryError). Safe for concurrent use.
type Budget interface {
	// TryReserve reserves n bytes; false (nothing reserved) when they do not fit. It may first
	// make room (the server parks suspended rollouts), for a fraction of a second.
	TryReserve(n int64) bool
	// Grow counts n bytes without a check, fitting or not: memory a step holds to make any
	// progress at all (its first AccrueChunk). Release returns them.
	Grow(n int64)
	// Release returns n bytes reserved by TryReserve or counted by Grow.
	Release(n int64)
}

// AccrueFactor is how many bytes of memory a step's accrued text and arguments hold per byte
// while the step runs: the text itself and its builder's room to grow (it doubles).
const AccrueFactor = 2

// StreamFactor is how many bytes of memory an upstream's event or frame holds per received
// byte while it is read and decoded: the bytes, the buffer's room to grow and the decoded
// text (as session.DecodeFactor for a client's frame).
const StreamFactor = 4

// DefaultMaxOutputTokens is the default bound on the tokens an upstream streams in one step
// when the request sets no lower max_output_tokens (the upstream backends' MaxOutputTokens
// option, -upstream-max-output-tokens): the largest output of today's large models (128k
// tokens). A step streamed past it ends incomplete (max_output_tokens), as with the request's
// own.
const DefaultMaxOutputTokens = 128 << 10

// StepTokens is the token bound of a step: the smaller of the request's max_output_tokens
// (0: none) and the server's bound (0 or negative: none); 0 means no bound.
func StepTokens(request, server int) int {
	switch {
	case server <= 0:
		return request
	case request <= 0:
		return server
	}
	return min(request, server)
}

// MeteredReader is an upstream's stream as a backend reads it: each Read reserves
// StreamFactor bytes of Budget per byte read, held until Settle (the bytes' event or frame has
// been applied, or dropped), so that what is being read counts in the server's memory budget
// as it grows. A Read that does not fit returns a *MemoryError naming What. A nil Budget
// counts nothing.
type MeteredReader struct {
	R      io.Reader
	Budget Budget
	What   string // what is read, for the MemoryError: "one event of the stream", "one WebSocket frame"
	Held   int64  // bytes of Budget reserved since the last Settle
	N      int64  // bytes read since the last Settle
}

func (m *MeteredReader) Read(p []byte) (int, error) {
	n, err := m.R.Read(p)
	if n > 0 && m.Budget != nil {
		cost := int64(n) * StreamFactor
		if !m.Budget.TryReserve(cost) {
			return 0, &MemoryError{What: m.What, Held: m.N + int64(n), Upstream: true}
		}
		m.Held += cost
	}
	m.N += int64(n)
	return n, err
}

// Settle gives back what the reads since the last Settle hold.
func (m *MeteredReader) Settle() {
	if m.Held > 0 {
		m.Budget.Release(m.Held)
	}
	m.Held, m.N = 0, 0
}

// MemoryError is the error of a step whose output does not fit in the server's memory budget
// (Config.Budget): returned by the rollout's Output (Text and Arguments) when the step's text
// and arguments do not fit, by a MeteredReader when an upstream's event or frame does not, and
// by a backend for what else it holds of a step. The rollout ends failed, error {code:
// server_error, message: "The model failed to generate a response: " and Error}, whatever the
// backend returns once its Output refused (it must stop: the Output refuses everything after);
// an upstream backend closes its stream. Nothing waits for room.
type MemoryError struct {
	// What is what did not fit: "one step's text and arguments", "one event of the stream",
	// "one WebSocket frame", "one value the sim synthesised".
	What string
	// Held is the bytes of it received or produced so far, the delta or chunk that did not
	// fit included.
	Held int64
	// Upstream reports that the bytes came from an upstream engine's stream (MeteredReader):
	// the message names it.
	Upstream bool
}

func (e *MemoryError) Error() string {
	of := "the model's output"
	if e.Upstream {
		of = "what the upstream engine streamed"
	}
	return fmt.Sprintf("the server's memory budget (-max-memory) is in use: it cannot hold more of %s (%s, %s so far)", of, e.What, approxSize(e.Held))
}

// approxSize writes n bytes in KiB or MiB, rounded to one decimal.
func approxSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
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
