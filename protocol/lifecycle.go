package protocol

// NewResponse returns the in_progress Response object for a create request: every key of the
// Open Responses ResponseResource with the effective settings echoed, output
// [] and usage null. createdAt is in unix seconds.
func NewResponse(id string, p *CreateParams, createdAt int64) Response {
	r := Response{
		ID:                 id,
		Object:             "response",
		CreatedAt:          createdAt,
		Status:             ResponseInProgress,
		Instructions:       p.Instructions,
		MaxOutputTokens:    p.MaxOutputTokens,
		MaxToolCalls:       p.MaxToolCalls,
		Model:              p.Model,
		Output:             []Item{},
		ParallelToolCalls:  p.ParallelCalls(),
		PreviousResponseID: p.PreviousResponseID,
		PromptCacheKey:     p.PromptCacheKey,
		SafetyIdentifier:   p.SafetyIdentifier,
		ServiceTier:        "auto",
		Store:              p.Stored(),
		Background:         p.Background != nil && *p.Background,
		Temperature:        1,
		ToolChoice:         p.ToolChoice,
		Tools:              p.Tools,
		TopP:               1,
		Truncation:         "disabled",
		User:               p.User,
		Metadata:           p.Metadata,
	}
	if r.Tools == nil {
		r.Tools = []Tool{}
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
func Finish(r Response, status, reason string, rerr *ResponseError, output []Item, usage Usage, now int64) Response {
	r.Status = status
	r.Output = output
	if r.Output == nil {
		r.Output = []Item{}
	}
	r.Usage = &usage
	if r.ServiceTier == "auto" {
		r.ServiceTier = "default"
	}
	switch status {
	case ResponseCompleted:
		r.CompletedAt = &now
	case ResponseIncomplete:
		r.IncompleteDetails = &IncompleteDetails{Reason: reason}
	case ResponseFailed:
		r.Error = rerr
		if r.Error == nil {
			r.Error = &ResponseError{Code: CodeServerError, Message: "The model failed to generate a response."}
		}
	}
	return r
}

// TerminalEvent returns the event type that ends a Response of the given status.
func TerminalEvent(status string) EventType {
	switch status {
	case ResponseCompleted:
		return EventCompleted
	case ResponseFailed:
		return EventFailed
	}
	return EventIncomplete
}
