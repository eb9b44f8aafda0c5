package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// session is one rollout's use of the engine: its converted messages, its replica and its
// claim on that replica's slots.
type session struct {
	m        *Model
	id       string
	settings *sampler.Settings
	msgs     []chatwire.Message
	eng      *engine
	lease    *lease // nil when the replica's slots are not owned
	cancel   context.CancelCauseFunc
	budget   sampler.Budget // the server's memory budget (RolloutInfo.Budget); nil: none

	// conv counts the items converted into msgs so far; breaks are the offsets among them
	// where a conversion began with a function_call that one conversion of all the items
	// would have merged into the assistant message before it (park.go rebuilds msgs from the
	// items with them).
	conv   int
	breaks []int
	// prompt is the prompt tokens the engine last reported for this conversation (0: none
	// yet), the lower bound of a later step's input when that step ends unreported.
	prompt int
	// parked: Park returned and no step has run since; Close then hands the session's saved
	// KV on to the parked rollout instead of removing it.
	parked bool
}

// errSilent is the cause of a request aborted by Options.Timeout.
var errSilent = errors.New("silent")

// attach places the session on a replica other than avoid (nil: any) and takes a lease there.
func (s *session) attach(ctx context.Context, avoid *engine) {
	e := s.m.place(avoid)
	if e.isDown() && e != avoid && e.probe(ctx) {
		e.ok()
	}
	s.attachTo(e, nil)
}

// attachTo places the session on e with lease l (nil: a new lease when e's slots are owned).
func (s *session) attachTo(e *engine, l *lease) {
	s.eng = e
	e.rollouts.Add(1)
	if e.slots != nil {
		if l == nil {
			l = &lease{id: s.id, slot: -1}
		}
		s.lease = l
	}
}

// detach gives up the session's replica: its slot and saved KV (kept for the parked rollout
// when the session parked).
func (s *session) detach() {
	if s.eng == nil {
		return
	}
	if s.lease != nil {
		if s.parked {
			s.eng.slots.handOff(s.lease)
		} else {
			s.eng.slots.close(s.lease)
		}
		s.lease = nil
	}
	s.eng.rollouts.Add(-1)
	s.eng = nil
}

// Prefill implements sampler.ModelSession: the items are converted and sent with the next
// Sample (a chat engine has no prefill-only request).
func (s *session) Prefill(_ context.Context, input []protocol.Item) error {
	s.parked = false
	var err error
	s.msgs, err = s.convert(s.msgs, input)
	return err
}

// convert appends items to msgs (chatwire.MessagesFromItems), counting them in conv and
// noting a break where this conversion starts apart from the items before it.
func (s *session) convert(msgs []chatwire.Message, items []protocol.Item) ([]chatwire.Message, error) {
	if s.conv > 0 && startsWithCall(items) {
		s.breaks = append(s.breaks, s.conv)
	}
	s.conv += len(items)
	return chatwire.MessagesFromItems(msgs, items)
}

// startsWithCall reports whether the first item of items that is not a reasoning item (which
// converts to nothing) is a function_call: a conversion starting there does not merge it into
// the assistant message before, as one conversion of everything might.
func startsWithCall(items []protocol.Item) bool {
	for i := range items {
		if items[i].Type != protocol.ItemReasoning {
			return items[i].Type == protocol.ItemFunctionCall
		}
	}
	return false
}

// Sample implements sampler.ModelSession: one streamed chat completion request on the
// session's replica and slot. When the replica is down or cannot be reached, the step goes to
// another replica with the whole conversation (prefilled there: its cached_tokens say so).
func (s *session) Sample(ctx context.Context, step *sampler.Step, out sampler.Output) (sampler.StepResult, error) {
	s.parked = false
	msgs, err := s.convert(s.msgs, step.Output)
	if err == nil {
		msgs, err = s.convert(msgs, step.Input)
	}
	s.msgs = msgs
	if err != nil { // e.g. an image in a continuation's message: the client's input
		return sampler.StepResult{}, &protocol.Error{Status: http.StatusBadRequest, Type: protocol.TypeInvalidRequest,
			Code: CodeInvalidPrompt, Message: "The input cannot be sent to the Chat Completions engine: " + err.Error()}
	}
	if s.eng.isDown() && len(s.m.engines) > 1 {
		s.move(ctx)
	}
	for tries := 1; ; tries++ {
		res, unreached, err := s.step(ctx, out)
		if !unreached || tries >= len(s.m.engines) {
			return res, err
		}
		s.move(ctx)
	}
}

// move puts the session on another replica after its own failed.
func (s *session) move(ctx context.Context) {
	old := s.eng
	s.detach()
	s.attach(ctx, old)
	s.eng.cold.Add(1)
}

// step sends one request to the session's replica. unreached reports a failure before the
// engine answered (refused, reset, 502/503/504): the step may be sent to another replica.
func (s *session) step(ctx context.Context, out sampler.Output) (res sampler.StepResult, unreached bool, err error) {
	e := s.eng
	slot := -1
	if s.lease != nil && !e.slotsChecked.Load() {
		if err := e.checkSlots(ctx); err != nil {
			s.m.failure(e, "slots", err)
			e.failed(err)
			return res, true, err
		}
	}
	if s.lease != nil {
		if slot, err = e.slots.acquire(ctx, s.lease); err != nil {
			return res, false, err
		}
		defer e.slots.release(s.lease)
	}
	e.steps.Add(1)
	defer e.steps.Add(-1)
	e.total.Add(1)
	body, err := json.Marshal(s.request(slot))
	if err != nil {
		return res, false, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	s.cancel = cancel
	defer cancel(nil)
	timer := time.AfterFunc(s.m.opts.Timeout, func() { cancel(errSilent) })
	defer timer.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return res, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	// A chat completion changes nothing on the engine but its cache, so it may be sent again:
	// the key lets net/http resend it when the engine closed a kept-alive connection before
	// reading it (llama-server advertises keep-alive, then closes after each streamed reply).
	req.Header.Set("Idempotency-Key", uuid.NewString())
	s.m.authorize(req)
	sent := time.Now()
	resp, err := s.m.client.Do(req)
	if err != nil {
		err = s.cause(ctx, fmt.Errorf("upstream request failed: %w", err))
		if ctx.Err() == nil || errors.Is(context.Cause(ctx), errSilent) {
			s.m.failure(e, kindOf(err), err)
			e.failed(err)
			return res, true, err
		}
		return res, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := statusError(resp, e.url)
		s.m.failure(e, fmt.Sprintf("http_%d", resp.StatusCode), err)
		if resp.StatusCode >= 500 {
			// 502, 503 and 504 say the engine behind a gateway did not take the request (or
			// is not ready): the replica is out of placement for its backoff and another
			// replica may serve the step. A 500 (or another 5xx) is the engine's own failure on
			// this request, which a client can cause (llama-server answers 500 to tool call
			// arguments that are not JSON): it is not sent again, and the replica stays.
			unreached := resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
				resp.StatusCode == http.StatusGatewayTimeout
			if unreached {
				e.failed(err)
			}
			return res, unreached, err
		}
		return res, false, err
	}
	rd := s.newReader(out, timer)
	rd.contentType = resp.Header.Get("Content-Type")
	defer rd.close()
	res, err = rd.read(ctx, resp.Body)
	if err != nil {
		rd.unreported(s.prompt)
		res = rd.res
		err = s.cause(ctx, err)
		if ctx.Err() == nil || errors.Is(context.Cause(ctx), errSilent) {
			kind := rd.failKind(err)
			s.m.failure(e, kind, err)
			if brokeOff(kind) {
				e.broke(err)
			}
		}
		return res, false, err
	}
	e.ok()
	if e.slots != nil {
		e.slots.reap(sent)
	}
	if res.InputTokens > 0 {
		s.prompt = res.InputTokens
	}
	e.input.Add(int64(res.InputTokens))
	e.cached.Add(int64(res.CachedTokens))
	return res, false, nil
}

// brokeOff reports whether a stream failure of kind (reader.failKind) may be the engine's
// death: the connection broke (eof, reset, refused) or the stream ended without a
// finish_reason.
func brokeOff(kind string) bool {
	switch kind {
	case "eof", "reset", "refused", "no_finish":
		return true
	}
	return false
}

// cause explains an error of a request whose context may have ended: the silence timeout, or
// the rollout's own end (returned as the context's error).
func (s *session) cause(ctx context.Context, err error) error {
	switch c := context.Cause(ctx); {
	case errors.Is(c, errSilent):
		return fmt.Errorf("the upstream engine sent nothing for %v (-upstream-timeout)", s.m.opts.Timeout)
	case c != nil:
		return c
	}
	return err
}

// request builds the upstream request of the session's messages on slot (-1: the engine's
// choice).
func (s *session) request(slot int) *chatwire.Request {
	r := &chatwire.Request{Messages: s.msgs, Stream: true, StreamOptions: &chatwire.StreamOptions{IncludeUsage: true}}
	r.SetSettings(s.settings, s.m.opts.LegacyMaxTokens)
	if s.m.opts.Model != "" {
		r.Model = s.m.opts.Model
	}
	if slot >= 0 {
		cache := true
		r.IDSlot, r.CachePrompt = &slot, &cache
	}
	return r
}

// Close implements sampler.ModelSession: it aborts a request still in flight and frees the
// session's slot and saved KV.
func (s *session) Close() {
	if s.cancel != nil {
		s.cancel(context.Canceled)
	}
	s.detach()
	s.msgs = nil
}
