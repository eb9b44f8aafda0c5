package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// reader turns one streamed chat completion into Output calls and a StepResult. It holds the
// engine to the step's bounds (Options: StepTimeout, MaxEventBytes, MaxStepBytes,
// MaxArgumentBytes, and max_output_tokens): an engine is trusted no more than a client.
type reader struct {
	out     *sampler.LimitedOutput
	timer   *time.Timer // the silence timer, reset at every event
	timeout time.Duration
	// maxOutput is the step's max_output_tokens (0: none), to tell a step the limit cut off
	// from one the engine's context cut off (both finish with "length").
	maxOutput int
	// capTokens is the bound the step is held to: the smaller of maxOutput and the server's
	// (Options.MaxOutputTokens); 0: none.
	capTokens int
	lim       limits
	// cancel ends the step's request with a cause (the session's cancel).
	cancel context.CancelCauseFunc
	// budget is the server's memory budget (nil: none): the event being read is held in it
	// until it is applied (close returns the last); the rollout counts the step's text and
	// arguments there itself. The body is read on the rollout's goroutine (Sample), and each
	// step has a response of its own, so a reservation that waits for room holds up that
	// rollout only.
	budget sampler.Budget
	body   *sampler.MeteredReader // set by read; an event counts in the budget while it is read and applied

	open   bool // a call is open
	index  int  // the open call's index
	id     string
	closed map[callKey]bool // calls already ended
	finish string
	// ended: a chunk carrying usage came after the chunk with the finish_reason, the last
	// thing an engine sends before [DONE]: the step is over there.
	ended bool
	// over: the answer is whole ([DONE], or ended); read only waits for the body's end.
	over bool
	// reported: a chunk carried the engine's usage or timings.
	reported bool
	res      sampler.StepResult

	// events counts the SSE data events read; head keeps the body's first headBytes bytes and
	// contentType its Content-Type, to say what an answer that held no event was.
	events      int
	head        []byte
	contentType string
}

// headBytes is how much of a step's body is kept to quote an answer that was not a stream.
const headBytes = 200

// callKey identifies a streamed call: its index, and its id when the engine reuses indexes.
type callKey struct {
	index int
	id    string
}

// newReader returns the reader of one step's stream into out; timer is the step's silence
// timer and s.cancel the step's cancel.
func (s *session) newReader(out sampler.Output, timer *time.Timer) *reader {
	lim := s.m.limits()
	maxTokens := sampler.StepTokens(s.settings.MaxOutputTokens, lim.outputTokens)
	return &reader{
		capTokens: maxTokens,
		out: sampler.LimitOutput(out, sampler.OutputLimits{MaxTokens: maxTokens, MaxBytes: lim.stepBytes,
			MaxArgumentBytes: lim.argBytes}),
		timer:     timer,
		timeout:   s.m.opts.Timeout,
		maxOutput: s.settings.MaxOutputTokens,
		lim:       lim,
		cancel:    s.cancel,
		budget:    s.budget,
	}
}

// close returns what the step's stream holds in the budget: the step has ended (its text and
// arguments are the rollout's to count).
func (r *reader) close() {
	if r.body != nil {
		r.body.Settle()
	}
}

// read consumes the SSE body until [DONE], its end after a finish_reason, or a usage chunk
// after the finish_reason (nothing else is expected then: an engine that never sends [DONE]
// and keeps the connection open does not hold the step until the silence timeout). After
// [DONE] or that usage chunk it reads on to the body's end for at most endGrace, so that
// net/http keeps the connection for the next step; the answer is whole either way. A step the
// engine streams past max_output_tokens ends there, incomplete; past a byte bound or the step
// timeout it fails. ctx is the step's: a large chunk waits for a heavy-work slot until it ends.
func (r *reader) read(ctx context.Context, body io.Reader) (sampler.StepResult, error) {
	if r.cancel != nil {
		cut := time.AfterFunc(r.lim.stepTimeout, func() { r.cancel(&stepTimeoutError{r.lim.stepTimeout}) })
		defer cut.Stop()
	}
	r.body = &sampler.MeteredReader{R: heardBody{body, r}, Budget: r.budget, What: "one event of the stream"}
	sse := protocol.NewSSEReaderLimit(r.body, r.lim.eventBytes)
	for {
		r.body.Settle() // the previous event has been applied
		_, data, err := sse.Next()
		if r.over {
			if err == nil {
				continue // [DONE], or anything after the answer: read on to the stream's end
			}
			break // its end, or endGrace passed: the answer is whole either way
		}
		if err == io.EOF {
			break
		}
		var me *sampler.MemoryError
		if errors.As(err, &me) {
			return r.res, me
		}
		if errors.Is(err, protocol.ErrSSETooLong) {
			return r.res, fmt.Errorf("the upstream engine sent an SSE line or event of more than %s (a stream that never ends a line or an event)", byteSize(r.lim.eventBytes))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) { // the connection closed inside the body
			return r.res, fmt.Errorf("the upstream engine's stream broke off mid-answer (%w): the engine may have crashed or restarted", err)
		}
		if err != nil {
			return r.res, fmt.Errorf("reading the upstream stream: %w", err)
		}
		r.events++
		if string(data) == "[DONE]" {
			r.end()
			continue
		}
		var c chatwire.Chunk
		if err := unmarshalChunk(ctx, data, &c); err != nil {
			if ctx.Err() != nil {
				return r.res, err
			}
			return r.res, fmt.Errorf("the upstream engine sent a malformed chunk: %s", chunkProblem(err))
		}
		if err := r.chunk(&c); err != nil {
			if errors.Is(err, sampler.ErrMaxOutputTokens) {
				// The engine ignored max_completion_tokens: the step ends where the limit is.
				r.res.Incomplete = protocol.ReasonMaxOutputTokens
				r.res.OutputTokens = max(r.res.OutputTokens, r.out.Tokens())
				return r.res, nil
			}
			return r.res, err
		}
		if r.ended {
			r.end()
		}
	}
	if r.finish == "" && r.events == 0 {
		return r.res, r.notStream()
	}
	if r.finish == "" {
		return r.res, errors.New("the upstream stream ended without a finish_reason")
	}
	if r.finish == chatwire.FinishLength {
		r.res.Incomplete = protocol.ReasonContextLength
		if r.maxOutput > 0 && (r.res.OutputTokens == 0 || r.res.OutputTokens >= r.maxOutput) ||
			r.capTokens > 0 && r.res.OutputTokens >= r.capTokens {
			r.res.Incomplete = protocol.ReasonMaxOutputTokens
		}
	}
	return r.res, nil
}

// heardBody is the body of a step's stream, read through the step's silence timer: every read
// that brings bytes resets it (until the answer is whole, when endGrace bounds the rest), so
// a long event that arrives slowly is not the engine's silence. The read limit of an event
// (Options.MaxEventBytes) and the memory budget bound what it may bring.
type heardBody struct {
	body io.Reader
	r    *reader
}

func (h heardBody) Read(p []byte) (int, error) {
	n, err := h.body.Read(p)
	if k := min(n, headBytes-len(h.r.head)); k > 0 {
		h.r.head = append(h.r.head, p[:k]...)
	}
	if n > 0 && !h.r.over {
		h.r.timer.Reset(h.r.timeout)
	}
	return n, err
}

// endGrace bounds the wait for a stream's end after its answer is whole: an engine that sends
// [DONE] and ends the body at once lets the connection be reused; one that holds it open only
// costs the step this much.
const endGrace = 250 * time.Millisecond

// end marks the answer whole: what follows is only read to the body's end, within endGrace.
func (r *reader) end() {
	r.over = true
	r.timer.Reset(min(r.timeout, endGrace))
}

// errNotStream is wrapped by the error of a 200 answer that held no SSE event.
var errNotStream = errors.New("the upstream engine's answer is not a Chat Completions stream")

// notStream is the error of a 200 answer that ended without one SSE data event: an engine
// that ignored "stream": true (a JSON chat.completion), or an -upstream URL that is not an
// OpenAI-compatible API (a web page). It names the Content-Type and quotes the answer's start.
func (r *reader) notStream() error {
	ct := r.contentType
	if ct == "" {
		ct = "none"
	}
	began := "it was empty"
	if len(r.head) > 0 {
		began = fmt.Sprintf("it began %q", r.head)
	}
	return fmt.Errorf("%w (HTTP 200, Content-Type %s, no SSE event; %s): -upstream must be the engine's "+
		"OpenAI-compatible API base (e.g. http://127.0.0.1:8080/v1), and the engine must stream a request with \"stream\": true",
		errNotStream, ct, began)
}

// failKind names the kind of a stream failure, for the failure count.
func (r *reader) failKind(err error) string {
	switch {
	case strings.Contains(err.Error(), "malformed chunk"):
		return "malformed"
	case strings.Contains(err.Error(), "reported an error"):
		return "stream_error"
	case errors.Is(err, errNotStream):
		return "not_stream"
	case strings.Contains(err.Error(), "without a finish_reason"):
		return "no_finish"
	case strings.Contains(err.Error(), "line or event of more than"):
		return "oversized_event"
	}
	var le *sampler.LimitError
	if errors.As(err, &le) {
		return "oversized_step"
	}
	var me *sampler.MemoryError
	if errors.As(err, &me) {
		return "memory_budget"
	}
	return kindOf(err)
}

// chunk applies one chunk.
func (r *reader) chunk(c *chatwire.Chunk) error {
	if c.Error != nil {
		return fmt.Errorf("the upstream engine reported an error in the stream: %s", cut(c.Error.Message))
	}
	// Engines send the usage chunk (choices: []) after the finish chunk, then [DONE].
	r.ended = r.finish != "" && c.Usage != nil
	r.usage(c)
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue
		}
		if d := ch.Delta.Content; d != nil && *d != "" {
			if err := r.out.Text(*d); err != nil {
				return err
			}
		}
		for j := range ch.Delta.ToolCalls {
			if err := r.toolCall(&ch.Delta.ToolCalls[j]); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			r.finish = *ch.FinishReason
		}
	}
	return nil
}

// toolCall applies one tool_calls delta: a new index (or a new id at the open index) starts a
// call, arguments extend the open one.
func (r *reader) toolCall(tc *chatwire.ToolCall) error {
	idx := 0
	if tc.Index != nil {
		idx = *tc.Index
	}
	if !r.open || idx != r.index || (tc.ID != "" && r.id != "" && tc.ID != r.id) {
		if r.closed == nil {
			r.closed = map[callKey]bool{}
		}
		if r.open {
			r.closed[callKey{r.index, r.id}] = true
		}
		if r.closed[callKey{idx, tc.ID}] || (tc.ID == "" && r.closed[callKey{idx, ""}]) {
			return fmt.Errorf("the upstream engine interleaved tool call %d with a later one", idx)
		}
		if tc.Function.Name == "" {
			return fmt.Errorf("the upstream engine started tool call %d without a function name", idx)
		}
		if err := r.out.Call(tc.Function.Name, tc.ID); err != nil {
			return err
		}
		r.open, r.index, r.id = true, idx, tc.ID
	}
	if tc.Function.Arguments == "" {
		return nil
	}
	return r.out.Arguments(tc.Function.Arguments)
}

// usage records the chunk's usage and llama.cpp timings, when present: each count between 0
// and sampler.MaxStepTokens, cached tokens at most the input tokens.
func (r *reader) usage(c *chatwire.Chunk) {
	r.reported = r.reported || c.Usage != nil || c.Timings != nil
	if u := c.Usage; u != nil {
		r.res.InputTokens, r.res.OutputTokens = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			r.res.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
	}
	if t := c.Timings; t != nil {
		if c.Usage == nil {
			r.res.InputTokens, r.res.OutputTokens = t.PromptN+t.CacheN, t.PredictedN
		}
		if c.Usage == nil || c.Usage.PromptTokensDetails == nil {
			r.res.CachedTokens = t.CacheN
		}
	}
	r.res.InputTokens, r.res.OutputTokens = sampler.TokenCount(r.res.InputTokens), sampler.TokenCount(r.res.OutputTokens)
	r.res.CachedTokens = protocol.CachedTokens(sampler.TokenCount(r.res.CachedTokens), r.res.InputTokens)
}

// unreported fills the usage of a step that ended (cancelled, disconnected, failed) before
// the engine reported any, from what Tether knows, never beyond what the engine did:
// OutputTokens is Tether's lower bound of the tokens it streamed (sampler.LimitedOutput's
// count: non-empty deltas, or bytes over 256), and once the engine streamed output (its
// prefill was over) InputTokens is prompt, the prompt tokens the engine reported for an
// earlier step of this conversation, which the current prompt holds (messages are only
// appended). CachedTokens stays 0: only the engine knows what it reused.
func (r *reader) unreported(prompt int) {
	if r.reported {
		return
	}
	r.res.OutputTokens = r.out.Tokens()
	if r.res.OutputTokens > 0 {
		r.res.InputTokens = prompt
	}
}

// chunkProblem says what is wrong with a chunk json.Unmarshal refused, in the wire's terms
// (the member's path and what it holds), never Go's type names.
func chunkProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s holds %s, not %s", te.Field, te.Value, jsonKind(te.Type))
	case errors.As(err, &te):
		return fmt.Sprintf("it is %s, not an object", te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON (at byte %d)", se.Offset)
	}
	return "not valid JSON"
}

// jsonKind names the JSON value a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer that fits " + t.Kind().String()
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// unmarshalChunk decodes one upstream chunk, in a heavy-work slot when it is large; ctx's
// error when ctx ends before one is free.
func unmarshalChunk(ctx context.Context, data []byte, c *chatwire.Chunk) error {
	release, err := protocol.CPUSlot(ctx, len(data))
	defer release()
	if err != nil {
		return err
	}
	return json.Unmarshal(data, c)
}
