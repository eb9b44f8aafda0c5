package session

import (
	"github.com/google/uuid"

	"github.com/tetherd/tether/protocol"
)

// NewID returns a new opaque id: prefix, "_", and 32 hex digits of a random UUID
// (e.g. "resp_3f0c…"). Ids are unique across connections and servers.
func NewID(prefix string) string {
	u := uuid.New()
	const hex = "0123456789abcdef"
	b := make([]byte, len(prefix)+1+32)
	n := copy(b, prefix)
	b[n] = '_'
	n++
	for _, x := range u {
		b[n] = hex[x>>4]
		b[n+1] = hex[x&15]
		n += 2
	}
	return string(b)
}

// NewResponse returns the in_progress Response object for a create request: every key of the
// Open Responses ResponseResource with the effective settings echoed (reference §8.3), output
// [] and usage null. createdAt is in unix seconds.
func NewResponse(id string, p *protocol.CreateParams, createdAt int64) protocol.Response {
	r := protocol.Response{
		ID:                 id,
		Object:             "response",
		CreatedAt:          createdAt,
		Status:             protocol.ResponseInProgress,
		Instructions:       p.Instructions,
		MaxOutputTokens:    p.MaxOutputTokens,
		MaxToolCalls:       p.MaxToolCalls,
		Model:              p.Model,
		Output:             []protocol.Item{},
		ParallelToolCalls:  p.ParallelCalls(),
		PreviousResponseID: p.PreviousResponseID,
		PromptCacheKey:     p.PromptCacheKey,
		SafetyIdentifier:   p.SafetyIdentifier,
		ServiceTier:        "auto",
		Store:              p.Stored(),
		Temperature:        1,
		ToolChoice:         p.ToolChoice,
		Tools:              p.Tools,
		TopP:               1,
		Truncation:         "disabled",
		User:               p.User,
		Metadata:           p.Metadata,
	}
	if r.Tools == nil {
		r.Tools = []protocol.Tool{}
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if p.Reasoning != nil {
		r.Reasoning = *p.Reasoning
	}
	if p.Text != nil {
		r.Text = *p.Text
	}
	if p.ServiceTier != nil {
		r.ServiceTier = *p.ServiceTier
	}
	if p.Temperature != nil {
		r.Temperature = *p.Temperature
	}
	if p.TopP != nil {
		r.TopP = *p.TopP
	}
	if p.TopLogprobs != nil {
		r.TopLogprobs = *p.TopLogprobs
	}
	if p.PresencePenalty != nil {
		r.PresencePenalty = *p.PresencePenalty
	}
	if p.FrequencyPenalty != nil {
		r.FrequencyPenalty = *p.FrequencyPenalty
	}
	if p.Truncation != nil {
		r.Truncation = *p.Truncation
	}
	return r
}

// Finish returns r completed as the rollout ended: status, output, usage, completed_at (unix
// seconds, for completed only), incomplete_details or error.
func Finish(r protocol.Response, status, reason string, rerr *protocol.ResponseError, output []protocol.Item, usage protocol.Usage, now int64) protocol.Response {
	r.Status = status
	r.Output = output
	if r.Output == nil {
		r.Output = []protocol.Item{}
	}
	r.Usage = &usage
	if r.ServiceTier == "auto" {
		r.ServiceTier = "default"
	}
	switch status {
	case protocol.ResponseCompleted:
		r.CompletedAt = &now
	case protocol.ResponseIncomplete:
		r.IncompleteDetails = &protocol.IncompleteDetails{Reason: reason}
	case protocol.ResponseFailed:
		r.Error = rerr
		if r.Error == nil {
			r.Error = &protocol.ResponseError{Code: protocol.CodeServerError, Message: "The model failed to generate a response."}
		}
	}
	return r
}

// TerminalEvent returns the event type that ends a Response of the given status.
func TerminalEvent(status string) string {
	switch status {
	case protocol.ResponseCompleted:
		return protocol.EventCompleted
	case protocol.ResponseFailed:
		return protocol.EventFailed
	}
	return protocol.EventIncomplete
}

// WithIDs returns a copy of items with an id on every message, function_call and
// function_call_output that had none ("msg_…", "fc_…", "fco_…"), as stored for input_items.
func WithIDs(items []protocol.Item) []protocol.Item {
	out := make([]protocol.Item, len(items))
	copy(out, items)
	for i := range out {
		if out[i].ID != "" {
			continue
		}
		switch out[i].Type {
		case protocol.ItemMessage:
			out[i].ID = NewID("msg")
		case protocol.ItemFunctionCall:
			out[i].ID = NewID("fc")
		case protocol.ItemFunctionCallOutput:
			out[i].ID = NewID("fco")
		}
	}
	return out
}
