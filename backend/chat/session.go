package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tetherd/tether/chatapi"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// session is one rollout's use of the engine: its converted messages and its pinned slot.
type session struct {
	m        *Model
	settings *sampler.Settings
	msgs     []chatapi.Message
	slot     int // pinned engine slot, -1 for none
	cancel   context.CancelCauseFunc
}

// errSilent is the cause of a request aborted by Options.Timeout.
var errSilent = errors.New("silent")

// Prefill implements sampler.ModelSession: the items are converted and sent with the next
// Sample (a chat engine has no prefill-only request).
func (s *session) Prefill(_ context.Context, input []protocol.Item) error {
	var err error
	s.msgs, err = chatapi.MessagesFromItems(s.msgs, input)
	return err
}

// Sample implements sampler.ModelSession: one streamed chat completion request.
func (s *session) Sample(ctx context.Context, step *sampler.Step, out sampler.Output) (sampler.StepResult, error) {
	msgs, err := chatapi.MessagesFromItems(s.msgs, step.Output)
	if err == nil {
		msgs, err = chatapi.MessagesFromItems(msgs, step.Input)
	}
	s.msgs = msgs
	if err != nil { // e.g. an image in a continuation's message: the client's input
		return sampler.StepResult{}, &protocol.Error{Status: http.StatusBadRequest, Type: protocol.TypeInvalidRequest,
			Code: CodeInvalidPrompt, Message: "The input cannot be sent to the Chat Completions engine: " + err.Error()}
	}
	body, err := json.Marshal(s.request())
	if err != nil {
		return sampler.StepResult{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	s.cancel = cancel
	defer cancel(nil)
	timer := time.AfterFunc(s.m.opts.Timeout, func() { cancel(errSilent) })
	defer timer.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.m.url, bytes.NewReader(body))
	if err != nil {
		return sampler.StepResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if s.m.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+s.m.opts.APIKey)
	}
	resp, err := s.m.client.Do(req)
	if err != nil {
		return sampler.StepResult{}, s.cause(ctx, fmt.Errorf("upstream request failed: %w", err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sampler.StepResult{}, statusError(resp)
	}
	rd := reader{out: out, timer: timer, timeout: s.m.opts.Timeout}
	res, err := rd.read(resp.Body)
	if err != nil {
		err = s.cause(ctx, err)
	}
	return res, err
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

// request builds the upstream request of the session's messages.
func (s *session) request() *chatapi.Request {
	r := &chatapi.Request{Messages: s.msgs, Stream: true, StreamOptions: &chatapi.StreamOptions{IncludeUsage: true}}
	r.SetSettings(s.settings, s.m.opts.LegacyMaxTokens)
	if s.m.opts.Model != "" {
		r.Model = s.m.opts.Model
	}
	if s.slot >= 0 {
		slot, cache := s.slot, true
		r.IDSlot, r.CachePrompt = &slot, &cache
	}
	return r
}

// Close implements sampler.ModelSession: it aborts a request still in flight and frees the
// pinned slot.
func (s *session) Close() {
	if s.cancel != nil {
		s.cancel(context.Canceled)
	}
	s.m.release(s.slot)
	s.slot = -1
	s.msgs = nil
}
