package chatapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// Handler serves POST /v1/chat/completions from Slots' Model (see the package doc). MaxBody
// bounds the request body (0: 32 MiB).
type Handler struct {
	Slots   *Slots
	MaxBody int64
}

// ServeHTTP implements http.Handler for POST /v1/chat/completions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, perr := h.decode(w, r)
	if perr != nil {
		WriteError(w, perr)
		return
	}
	instructions, items, err := ItemsFromMessages(req.Messages)
	if err != nil {
		WriteError(w, protocol.ErrorOf(err))
		return
	}
	settings, err := SettingsFromRequest(req, instructions)
	if err != nil {
		WriteError(w, protocol.ErrorOf(err))
		return
	}
	if err := sampler.CheckRequest(h.Slots.model, createParams(req, &settings, items)); err != nil {
		WriteError(w, protocol.ErrorOf(err))
		return
	}
	id := -1
	if req.IDSlot != nil {
		id = *req.IDSlot
	}
	s, err := h.Slots.acquire(r.Context(), id, items)
	if err != nil {
		writeFailure(w, err)
		return
	}
	defer h.Slots.release(s)
	h.run(w, r.Context(), s, req, &settings, items)
}

// decode reads and decodes the body.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request) (*Request, *protocol.Error) {
	limit := h.MaxBody
	if limit <= 0 {
		limit = 32 << 20
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeBodyTooLarge, "",
				"The request body is larger than this server's limit of %d bytes.", limit)
		}
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidJSON, "", "Could not read the request body: %v", err)
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidType, te.Field,
				"Invalid type for '%s': expected %s, but got a JSON %s.", te.Field, te.Type, te.Value)
		}
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidJSON, "", "The request body is not valid JSON.")
	}
	if perr := checkRanges(&req); perr != nil {
		return nil, perr
	}
	switch {
	case req.Model == "":
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeMissingRequiredParameter, "model", "Missing required parameter: 'model'.")
	case len(req.Messages) == 0:
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeMissingRequiredParameter, "messages", "Missing required parameter: 'messages' (a non-empty array).")
	case req.N != nil && *req.N != 1:
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, "n", "Only n=1 is supported: this server samples one choice per request.")
	}
	return &req, nil
}

// createParams is the request as a create, for the backend's RequestChecker.
func createParams(req *Request, s *sampler.Settings, items []protocol.Item) *protocol.CreateParams {
	p := &protocol.CreateParams{Model: req.Model, Input: items, Tools: s.Tools, ToolChoice: s.ToolChoice,
		ParallelToolCalls: req.ParallelToolCalls, Metadata: req.Metadata, Temperature: req.Temperature, TopP: req.TopP,
		PresencePenalty: req.PresencePenalty, FrequencyPenalty: req.FrequencyPenalty}
	if s.Verbosity != "" {
		p.Text = &protocol.TextConfig{Verbosity: s.Verbosity}
	}
	if s.Instructions != "" {
		p.Instructions = &s.Instructions
	}
	if s.MaxOutputTokens > 0 {
		p.MaxOutputTokens = &s.MaxOutputTokens
	}
	return p
}

// run samples one step on slot s and writes the answer.
func (h *Handler) run(w http.ResponseWriter, ctx context.Context, s *slot, req *Request, settings *sampler.Settings, items []protocol.Item) {
	reuse := req.CachePrompt == nil || *req.CachePrompt
	step, err := s.prepare(ctx, h.Slots.model, settings, items, reuse)
	if err != nil {
		writeFailure(w, err)
		return
	}
	a := &answer{w: w, rc: http.NewResponseController(w), stream: req.Stream, id: newID("chatcmpl-"),
		created: time.Now().Unix(), model: req.Model, used: map[string]bool{}}
	for i := range items {
		if items[i].Type == protocol.ItemFunctionCall {
			a.used[items[i].CallID] = true
		}
	}
	res, err := sample(ctx, s.ms, step, a)
	s.done(items, a.items, err == nil, h.Slots.maxBytes)
	if err != nil {
		if a.started {
			_ = a.write(errorJSON(failure(err)))
		} else if ctx.Err() == nil {
			writeFailure(w, err)
		}
		return
	}
	u, t := usage(&res)
	finish := a.finishReason(&res)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&Completion{ID: a.id, Object: ObjectCompletion, Created: a.created, Model: a.model,
			Choices: []CompletionChoice{{Message: a.message(), FinishReason: finish, Logprobs: json.RawMessage("null")}},
			Usage:   u, Timings: &t})
		return
	}
	h.finish(a, req, finish, &u, &t)
}

// finish writes the stream's finish chunk, usage chunk and [DONE].
func (h *Handler) finish(a *answer, req *Request, finish string, u *Usage, t *Timings) {
	if err := a.begin(); err != nil {
		return
	}
	last := &Chunk{Choices: []ChunkChoice{{FinishReason: &finish}}}
	if req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		last.Timings = t
	}
	if a.send(last) != nil {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		if a.send(&Chunk{Choices: []ChunkChoice{}, Usage: u, Timings: t}) != nil {
			return
		}
	}
	_ = a.write([]byte("[DONE]"))
}

// sample runs the step; a panicking backend fails the request, not the server.
func sample(ctx context.Context, ms sampler.ModelSession, step *sampler.Step, out sampler.Output) (res sampler.StepResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &sampler.PanicError{Value: v}
		}
	}()
	return ms.Sample(ctx, step, out)
}

// failure is the API error for a failed step or slot wait: a *protocol.Error as it is, else a
// 500 server_error naming the cause.
func failure(err error) *protocol.Error {
	if e, ok := protocol.AsError(err); ok {
		return e
	}
	msg := "The model failed to generate a response: " + err.Error()
	var pe *sampler.PanicError
	if errors.As(err, &pe) {
		msg = "The model backend failed with an internal error."
	}
	return &protocol.Error{Status: http.StatusInternalServerError, Type: protocol.TypeServer, Code: protocol.CodeServerError, Message: msg}
}

// writeFailure writes err's API error unless the client is gone (a context error).
func writeFailure(w http.ResponseWriter, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	WriteError(w, failure(err))
}

// errorJSON is {"error":{…}} for e.
func errorJSON(e *protocol.Error) []byte {
	b := protocol.AppendHTTPError(nil, e)
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return b
}

// WriteError writes e in OpenAI's error envelope with e.Status.
func WriteError(w http.ResponseWriter, e *protocol.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(protocol.AppendHTTPError(nil, e))
}

// ServeSlots serves GET /slots: the slots' state as a JSON array (llama.cpp's endpoint, with
// Tether's fields id, is_processing and n_items).
func (h *Handler) ServeSlots(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(h.Slots.Info())
}

// checkRanges holds the numeric fields to OpenAI's documented ranges, with its codes (as
// protocol.CreateBounds does for /v1/responses): temperature 0–2, top_p 0–1, max_tokens and
// max_completion_tokens at least 1.
func checkRanges(req *Request) *protocol.Error {
	decimal := func(param string, v *float64, lo, hi float64) *protocol.Error {
		switch {
		case v == nil:
			return nil
		case *v < lo:
			return protocol.Errorf(http.StatusBadRequest, protocol.CodeDecimalBelowMin, param,
				"Invalid '%s': decimal below minimum value. Expected a value >= %g, but got %g instead.", param, lo, *v)
		case *v > hi:
			return protocol.Errorf(http.StatusBadRequest, protocol.CodeDecimalAboveMax, param,
				"Invalid '%s': decimal above maximum value. Expected a value <= %g, but got %g instead.", param, hi, *v)
		}
		return nil
	}
	integer := func(param string, v *int) *protocol.Error {
		if v != nil && *v < 1 {
			return protocol.Errorf(http.StatusBadRequest, protocol.CodeIntegerBelowMin, param,
				"Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", param, *v)
		}
		return nil
	}
	if v := req.Verbosity; v != "" && v != "low" && v != "medium" && v != "high" {
		return protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidValue, "verbosity",
			"Invalid value: '%s'. Supported values are: 'low', 'medium', and 'high'.", v)
	}
	for _, err := range []*protocol.Error{decimal("temperature", req.Temperature, 0, 2), decimal("top_p", req.TopP, 0, 1),
		decimal("presence_penalty", req.PresencePenalty, -2, 2), decimal("frequency_penalty", req.FrequencyPenalty, -2, 2),
		integer("max_tokens", req.MaxTokens), integer("max_completion_tokens", req.MaxCompletionTokens)} {
		if err != nil {
			return err
		}
	}
	return nil
}
