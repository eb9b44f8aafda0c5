package chatapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
	"github.com/tetherd/tether/session"
	"github.com/tetherd/tether/session/store"
)

// Handler serves POST /v1/chat/completions from Slots' Model (see the package doc). MaxBody
// bounds the request body (0: 32 MiB).
type Handler struct {
	Slots   *Slots
	MaxBody int64
	// ReadBody, if set, admits and reads each request body: the server's memory budget, its
	// bound on bodies decoded at once and its read timeout (compat.HTTP.ReadBody, whose errors
	// are answered as they are). The reservation is kept, shrunk to the request's items and
	// settings, until the answer has been written. Nil reads the body with MaxBody as the
	// only bound.
	ReadBody func(http.ResponseWriter, *http.Request) ([]byte, *session.Reservation, error)
	// Admission, if set, is the server-wide gate on sampling steps (-max-sampling) that each
	// request's step passes, with the rollouts of the other routes.
	Admission *session.Admission
	// Logger receives the value and stack of a panicking backend. Nil means slog.Default().
	Logger *slog.Logger
}

// ServeHTTP implements http.Handler for POST /v1/chat/completions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, res, err := h.decode(w, r)
	defer res.Release()
	if err != nil {
		WriteError(w, protocol.ErrorOf(err))
		return
	}
	instructions, items, err := chatwire.ItemsFromMessages(req.Messages)
	if err != nil {
		WriteError(w, protocol.ErrorOf(err))
		return
	}
	settings, err := chatwire.SettingsFromRequest(req, instructions)
	if err != nil {
		WriteError(w, protocol.ErrorOf(err))
		return
	}
	res.Keep(session.ItemsBytes(items) + store.SettingsBytes(&settings.Instructions, settings.Tools, settings.ToolChoice.Raw, settings.TextFormat, settings.Metadata))
	if err := sampler.CheckRequest(h.Slots.model, createParams(req, &settings, items)); err != nil {
		WriteError(w, protocol.ErrorOf(err))
		return
	}
	id := -1
	if req.IDSlot != nil {
		id = *req.IDSlot
	}
	s, err := h.Slots.acquire(r.Context(), session.ShareKeyFrom(r.Context()), id, items)
	if err != nil {
		writeFailure(w, err)
		return
	}
	defer h.Slots.release(s)
	h.run(w, r.Context(), s, req, &settings, items)
}

// decode reads and decodes the body; the reservation (nil without ReadBody) is to be released
// once the request has been answered.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request) (*chatwire.Request, *session.Reservation, error) {
	body, res, err := h.read(w, r)
	if err != nil {
		return nil, nil, err
	}
	req, perr := decodeRequest(r.Context(), body)
	if perr != nil {
		return nil, res, perr
	}
	return req, res, nil
}

// read reads the body through ReadBody, or with MaxBody as the only bound.
func (h *Handler) read(w http.ResponseWriter, r *http.Request) ([]byte, *session.Reservation, error) {
	if h.ReadBody != nil {
		return h.ReadBody(w, r)
	}
	limit := h.MaxBody
	if limit <= 0 {
		limit = 32 << 20
	}
	body, err := protocol.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, nil, protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.CodeBodyTooLarge, "",
				"The request body is larger than this server's limit of %d bytes.", limit)
		}
		return nil, nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidJSON, "", "Could not read the request body: %v", err)
	}
	return body, nil, nil
}

// decodeRequest decodes and checks a request body, in a heavy-work slot when it is large
// (protocol.CPUSlot): client_closed_request (499) when ctx, the request's, ends before one
// is free.
func decodeRequest(ctx context.Context, body []byte) (*chatwire.Request, *protocol.Error) {
	release, perr := protocol.HeavySlot(ctx, len(body))
	defer release()
	if perr != nil {
		return nil, perr
	}
	var req chatwire.Request
	if err := json.Unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidType, te.Field,
				"Invalid type for '%s': expected %s, but got a JSON %s.", te.Field, te.Type, te.Value)
		}
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.CodeInvalidJSON, "", "The request body is not valid JSON.")
	}
	if perr := checkMembers(body); perr != nil {
		return nil, perr
	}
	if perr := checkRanges(&req); perr != nil {
		return nil, perr
	}
	if perr := protocol.CheckModelName(req.Model); perr != nil {
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
func createParams(req *chatwire.Request, s *sampler.Settings, items []protocol.Item) *protocol.CreateParams {
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
func (h *Handler) run(w http.ResponseWriter, ctx context.Context, s *slot, req *chatwire.Request, settings *sampler.Settings, items []protocol.Item) {
	if err := h.Admission.Acquire(ctx); err != nil {
		writeFailure(w, err)
		return
	}
	defer h.Admission.Release()
	reuse := req.CachePrompt == nil || *req.CachePrompt
	var step *sampler.Step
	err := guard(func() (err error) {
		step, err = s.prepare(ctx, h.Slots.model, settings, items, reuse)
		return err
	})
	if err != nil {
		logPanic(h.Logger, "opening or reusing a slot's session", err)
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
	var res sampler.StepResult
	err = guard(func() (err error) {
		res, err = s.ms.Sample(ctx, step, a)
		return err
	})
	s.done(items, a.items, err == nil)
	if err != nil {
		logPanic(h.Logger, "sampling", err)
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
		_ = json.NewEncoder(w).Encode(&chatwire.Completion{ID: a.id, Object: chatwire.ObjectCompletion, Created: a.created, Model: a.model,
			Choices: []chatwire.CompletionChoice{{Message: a.message(), FinishReason: finish, Logprobs: json.RawMessage("null")}},
			Usage:   u, Timings: &t})
		return
	}
	h.finish(a, req, finish, &u, &t)
}

// finish writes the stream's finish chunk, usage chunk and [DONE].
func (h *Handler) finish(a *answer, req *chatwire.Request, finish string, u *chatwire.Usage, t *chatwire.Timings) {
	if err := a.begin(); err != nil {
		return
	}
	last := &chatwire.Chunk{Choices: []chatwire.ChunkChoice{{FinishReason: &finish}}}
	if req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		last.Timings = t
	}
	if a.send(last) != nil {
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		if a.send(&chatwire.Chunk{Choices: []chatwire.ChunkChoice{}, Usage: u, Timings: t}) != nil {
			return
		}
	}
	_ = a.write([]byte("[DONE]"))
}

// guard runs a call into the backend: a panic fails the request (a *sampler.PanicError with
// the panic's value and stack), not the server.
func guard(call func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &sampler.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return call()
}

// logPanic logs the value and stack of a panicking backend when err is a *sampler.PanicError;
// during says what the backend was doing. A nil log means slog.Default().
func logPanic(log *slog.Logger, during string, err error) {
	var pe *sampler.PanicError
	if !errors.As(err, &pe) {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	log.Error("chat completion: the model backend panicked", "during", during, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
}

// failure is the API error for a failed step or slot wait: a *protocol.Error as it is (one
// that names the model's input, param "input" as the Responses API calls it, names
// "messages"), else a 500 server_error naming the cause.
func failure(err error) *protocol.Error {
	if e, ok := protocol.AsError(err); ok {
		if e.Param == "input" {
			named := *e
			named.Param = "messages"
			return &named
		}
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

// WriteError writes e in OpenAI's error envelope: protocol.WriteHTTPError.
func WriteError(w http.ResponseWriter, e *protocol.Error) { protocol.WriteHTTPError(w, e) }

// ServeSlots serves GET /slots: the slots' state as a JSON array (llama.cpp's endpoint, with
// Tether's fields id, is_processing, n_items and n_bytes).
func (h *Handler) ServeSlots(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(h.Slots.Info())
}

// checkRanges holds the numeric fields to OpenAI's documented ranges, with its codes (as
// protocol.CreateBounds does for /v1/responses): temperature 0–2, top_p 0–1, max_tokens and
// max_completion_tokens at least 1.
func checkRanges(req *chatwire.Request) *protocol.Error {
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
