package responses

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// session is one rollout's upstream chain.
type session struct {
	up       *upstream
	connID   string
	settings *sampler.Settings

	// prev is the upstream Response of the previous step, valid on socket generation gen
	// ("" until a step completed): the next step's previous_response_id.
	prev string
	gen  int
	// chain is the settings of the current upstream chain: max_tool_calls and tool_choice are
	// what remained of the rollout's when the chain started.
	chain sampler.Settings
	// pending holds items for the next hot step that no step has sent yet (a Prefill's).
	pending []protocol.Item
	// lastCalls are the upstream call_ids of the previous step's function_calls, in order;
	// callIDs maps a Tether call_id to the upstream's where the rollout replaced it.
	lastCalls []string
	callIDs   map[string]string
	// started reports that an exchange succeeded (a chain exists, live or not).
	started bool
	closed  bool
}

// maxAttempts bounds the transparent restarts of one step (a stale socket, then the
// connection-age limit, then a lost previous response).
const maxAttempts = 3

// Prefill implements sampler.ModelSession with an upstream warm-up (response.create with
// generate:false): the items go upstream at once, as a new chain for the rollout's first
// Prefill (its items are the whole context) or as a continuation of a live chain. A later
// Prefill whose chain is gone with its socket keeps the items for the next step, which sends
// the full context anyway.
func (s *session) Prefill(ctx context.Context, input []protocol.Item) error {
	if err := s.up.acquire(ctx); err != nil {
		return err
	}
	defer s.up.unlock()
	s.pending = append(s.pending, input...)
	if s.started && !s.live() {
		return nil
	}
	full := s.pending
	if s.started {
		full = nil // a live chain: retried with the full context, it is left to the next step
	}
	_, err := s.exchange(ctx, full, 0, discard{}, false)
	if err != nil && s.started {
		s.prev = ""
		return nil
	}
	return err
}

// Sample implements sampler.ModelSession: one response.create on the connection's socket,
// streamed into out (see the package doc for the hot path and recovery).
func (s *session) Sample(ctx context.Context, step *sampler.Step, out sampler.Output) (sampler.StepResult, error) {
	d := s.up.m.opts.StepTimeout
	ctx, cancel := context.WithTimeoutCause(ctx, d, &stepTimeoutError{d})
	defer cancel()
	if err := s.up.acquire(ctx); err != nil {
		return sampler.StepResult{}, err
	}
	defer s.up.unlock()
	s.mapCalls(step.Output)
	s.pending = append(s.pending, step.Input...)
	return s.exchange(ctx, step.Context, step.Calls, out, true)
}

// exchange sends the pending items (hot) or full, the rollout's whole context (a new chain;
// nil: no new chain may start), and streams the upstream's answer into out. calls is the
// number of calls the rollout made before. It restarts the exchange as the package doc says.
func (s *session) exchange(ctx context.Context, full []protocol.Item, calls int, out sampler.Output, generate bool) (sampler.StepResult, error) {
	restart := false
	for attempt := 1; ; attempt++ {
		res, retry, err := s.attempt(ctx, full, calls, out, restart, generate)
		if err == nil {
			s.pending = s.pending[:0]
			s.started = true
			return res, nil
		}
		if retry == noRetry || attempt == maxAttempts || full == nil {
			return res, err
		}
		restart = retry == retryFull
	}
}

// live reports that the previous exchange's Response lives on the current socket.
func (s *session) live() bool {
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	return s.prev != "" && s.up.conn != nil && s.gen == s.up.gen
}

// discard is the Output of a warm-up, which generates nothing.
type discard struct{}

func (discard) Text(string) error         { return nil }
func (discard) Call(string, string) error { return nil }
func (discard) Arguments(string) error    { return nil }

// retry says whether and how a failed attempt may run again.
type retry int

const (
	noRetry   retry = iota
	retryNew        // on a new socket (the chain is gone with the old one)
	retryFull       // on the same socket, with the full context
)

// attempt sends the step once and reads its events up to the terminal one.
func (s *session) attempt(ctx context.Context, full []protocol.Item, calls int, out sampler.Output, restart, generate bool) (sampler.StepResult, retry, error) {
	c, gen, fresh, err := s.up.socket(ctx)
	if err != nil {
		return sampler.StepResult{}, noRetry, err
	}
	f := s.create(full, calls, gen, restart)
	if !generate {
		f.Generate = &generate
	}
	o := &s.up.m.opts
	lim := sampler.OutputLimits{MaxBytes: o.MaxStepBytes, MaxArgumentBytes: o.MaxArgumentBytes}
	if generate {
		lim.MaxTokens = sampler.StepTokens(s.settings.MaxOutputTokens, o.MaxOutputTokens)
	}
	st := &stream{out: sampler.LimitOutput(out, lim)}
	res, id, clean, err := s.run(ctx, c, f, st)
	if errors.Is(err, sampler.ErrMaxOutputTokens) {
		// The upstream streamed past max_output_tokens: the step ends there, and the socket,
		// still carrying the rest of that response, is dropped (so is the chain).
		s.up.drop(c)
		s.prev = ""
		s.lastCalls = st.calls
		return sampler.StepResult{OutputTokens: st.out.Tokens(), Incomplete: protocol.ReasonMaxOutputTokens}, noRetry, nil
	}
	if err == nil {
		s.prev, s.gen = id, gen
		if generate {
			s.lastCalls = st.calls
		}
		return res, noRetry, nil
	}
	r := s.retryOf(err, st, fresh, f.PreviousResponseID != "")
	if !clean || r == retryNew {
		s.up.drop(c)
	}
	return res, r, err
}

// retryOf classifies a failed attempt: the connection-age limit, a going-away close or a
// socket found dead before it answered (not one dialled for this attempt) retry on a new
// socket; a lost previous response retries with the full context. Nothing retries once the
// client saw output of the step.
func (s *session) retryOf(err error, st *stream, fresh, hot bool) retry {
	if st.streamed {
		return noRetry
	}
	var ue *UpstreamError
	var se *socketError
	var ie *incompleteError
	switch {
	case errors.As(err, &ue) && ue.Code == codeConnectionLimit:
		return retryNew
	case errors.As(err, &ie) && (ie.reason == protocol.ReasonConnectionLimit || ie.reason == protocol.ReasonServerShutdown):
		return retryNew
	case errors.As(err, &ue) && ue.Code == codePreviousNotFound && hot:
		return retryFull
	case errors.As(err, &se) && (se.status == websocket.StatusGoingAway || !fresh && !se.answered):
		return retryNew
	}
	return noRetry
}

// create returns the step's response.create: a hot continuation of the upstream chain when
// the previous step's Response lives on this socket, else a new chain with the full context.
func (s *session) create(full []protocol.Item, calls, gen int, restart bool) *createFrame {
	if !restart && s.prev != "" && s.gen == gen || full == nil {
		return newCreate(&s.chain, s.chain.MaxToolCalls, s.prev, inputItems(s.pending, s.callIDs))
	}
	s.chain = *s.settings
	if m := s.settings.MaxToolCalls; m > 0 {
		s.chain.MaxToolCalls = m - calls
		if s.chain.MaxToolCalls <= 0 {
			s.chain.MaxToolCalls = 0
			s.chain.ToolChoice = protocol.ToolChoice{Mode: protocol.ToolChoiceNone}
		}
	}
	s.callIDs = nil // the full context carries Tether's call_ids on both sides
	s.lastCalls = nil
	return newCreate(&s.chain, s.chain.MaxToolCalls, "", inputItems(full, nil))
}

// mapCalls records where the rollout replaced the upstream's call_ids of the previous step
// (output holds the function_calls as the client saw them, in the upstream's order).
func (s *session) mapCalls(output []protocol.Item) {
	i := 0
	for _, it := range output {
		if it.Type != protocol.ItemFunctionCall || i >= len(s.lastCalls) {
			continue
		}
		if up := s.lastCalls[i]; up != "" && up != it.CallID {
			if s.callIDs == nil {
				s.callIDs = map[string]string{}
			}
			s.callIDs[it.CallID] = up
		}
		i++
	}
	s.lastCalls = nil
}

// Close implements sampler.ModelSession: it drops the session's share of the socket (the
// last session of the connection closes it).
func (s *session) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.up.m.release(s.connID, s.up)
}

// stepTimeoutError is the cause of a step cut by Options.StepTimeout.
type stepTimeoutError struct{ d time.Duration }

func (e *stepTimeoutError) Error() string {
	return fmt.Sprintf("the upstream streamed one step for longer than %v (-upstream-step-timeout)", e.d)
}

// socketError is a step's socket failure: a read or write error, or a close frame (status).
type socketError struct {
	status   websocket.StatusCode // -1 when the socket failed without a close frame
	answered bool                 // the upstream had sent a frame of this step
	err      error
}

func (e *socketError) Error() string { return e.err.Error() }
func (e *socketError) Unwrap() error { return e.err }

// run writes f and streams the step's events. clean reports that the socket is at a frame
// boundary with no response in flight (a terminal event or an error frame was read).
func (s *session) run(ctx context.Context, c *socket, f *createFrame, st *stream) (res sampler.StepResult, id string, clean bool, err error) {
	data, err := json.Marshal(f)
	if err != nil {
		return res, "", false, fmt.Errorf("encode response.create: %w", err)
	}
	if err := s.write(ctx, c, data); err != nil {
		return res, "", false, err
	}
	created := false // the step's response.created was read; id is its Response's
	for answered := false; ; answered = true {
		ev, cost, err := s.read(ctx, c, answered)
		if err != nil {
			return res, "", false, err
		}
		switch {
		case ev.Type == "error":
			c.release(cost)
			return res, "", true, frameError(ev)
		case ev.Type == "response.created" && !created:
			created = true
			if ev.Response != nil {
				id = ev.Response.ID
			}
		default:
			// Anything before response.created (frames of a response the upstream streamed on
			// after its error frame or terminal event), a second response.created, or a
			// terminal event of another response leaves the socket out of step with the chain:
			// its frames would be taken as the next step's, so the socket is closed.
			if err := inStep(ev, created, id); err != nil {
				c.release(cost)
				return res, "", false, err
			}
			if terminal(ev.Type) {
				c.release(cost)
				res, err = result(ev.Response, ev.Type)
				return res, id, true, err
			}
		}
		err = st.event(ev)
		c.release(cost) // applied: its text, if any, is counted by st.out
		if err != nil {
			return res, "", false, err
		}
	}
}

// inStep checks that an event other than an error frame or the step's first response.created
// belongs to the step's response: it comes after response.created (created; id is that
// Response's id), is not a second response.created, and a terminal event names the same
// Response id when both name one.
func inStep(ev *serverEvent, created bool, id string) error {
	switch {
	case !created:
		return fmt.Errorf("upstream sent %s before response.created", ev.Type)
	case ev.Type == "response.created":
		return errors.New("upstream sent a second response.created in one step")
	case terminal(ev.Type) && ev.Response != nil && ev.Response.ID != "" && id != "" && ev.Response.ID != id:
		return fmt.Errorf("upstream sent %s of another response than the one it created", ev.Type)
	}
	return nil
}

// terminal reports a Response's terminal event type.
func terminal(typ string) bool {
	return typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed"
}

// write sends one frame within the silence timeout.
func (s *session) write(ctx context.Context, c *socket, data []byte) error {
	if err := c.write(ctx, s.up.m.opts.Timeout, data); err != nil {
		return s.socketErr(ctx, err, false)
	}
	return nil
}

// read returns the next upstream event within the silence timeout, and the budget its frame
// holds (the caller releases it once the event is applied: socket.release).
func (s *session) read(ctx context.Context, c *socket, answered bool) (*serverEvent, int64, error) {
	f := c.next(ctx, s.up.m.opts.Timeout)
	if f.err != nil {
		var me *sampler.MemoryError
		if errors.As(f.err, &me) {
			return nil, 0, me
		}
		return nil, 0, s.socketErr(ctx, f.err, answered)
	}
	if f.typ != websocket.MessageText {
		c.release(f.cost)
		return nil, 0, fmt.Errorf("upstream sent a binary frame")
	}
	ev, err := decodeEvent(ctx, f.data)
	if err != nil {
		c.release(f.cost)
		return nil, 0, err
	}
	return ev, f.cost, nil
}

// socketErr explains a socket failure: the step's ctx ending, the silence timeout, a close
// frame or a dropped socket.
func (s *session) socketErr(ctx context.Context, err error, answered bool) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	se := &socketError{status: websocket.CloseStatus(err), answered: answered, err: err}
	switch {
	case errors.Is(err, errSilent), errors.Is(err, context.DeadlineExceeded):
		se.err = fmt.Errorf("upstream silent for %v", s.up.m.opts.Timeout)
	case se.status != -1:
		se.err = fmt.Errorf("upstream closed the WebSocket (close %d %s)", int(se.status), se.status)
	default:
		se.err = fmt.Errorf("upstream WebSocket lost: %v", err)
	}
	return se
}
