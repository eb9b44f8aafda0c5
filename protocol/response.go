package protocol

import "encoding/json"

// Response statuses.
const (
	ResponseInProgress = "in_progress"
	ResponseCompleted  = "completed"
	ResponseIncomplete = "incomplete"
	ResponseFailed     = "failed"
	// ResponseQueued: a background response accepted and not yet started (POST answer, GET).
	ResponseQueued = "queued"
	// ResponseCancelled: a background response ended by POST /v1/responses/{id}/cancel.
	ResponseCancelled = "cancelled"
)

// Incomplete reasons carried in incomplete_details.reason.
const (
	ReasonMaxOutputTokens = "max_output_tokens"
	// ReasonContextLength: the engine's context window filled before the model finished (an
	// upstream engine's finish_reason "length" with no max_output_tokens reached). The client
	// can act on it by shortening the conversation (compaction) or raising the engine's context.
	ReasonContextLength = "context_length_exceeded"
	ReasonCancelled     = "cancelled"
	// ReasonSteered: the response was interrupted by response.steer; a successor response
	// continues with the steer's input.
	ReasonSteered           = "steered"
	ReasonIdleTimeout       = "idle_timeout"
	ReasonServerShutdown    = "server_shutdown"
	ReasonConnectionLimit   = "connection_limit"
	ReasonMaxToolCalls      = "max_tool_calls"
	ReasonSuspendedRollouts = "suspended_rollout_limit"
)

// Response is the Response object. Every key of the Open Responses
// ResponseResource schema is always serialised (see MarshalJSON): nil pointers become null.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`       // always "response"
	CreatedAt          int64              `json:"created_at"`   // unix seconds
	CompletedAt        *int64             `json:"completed_at"` // unix seconds, set when completed
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	MaxToolCalls       *int               `json:"max_tool_calls"`
	Model              string             `json:"model"`
	Output             []Item             `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	PromptCacheKey     *string            `json:"prompt_cache_key"`
	Reasoning          Reasoning          `json:"reasoning"`
	SafetyIdentifier   *string            `json:"safety_identifier"`
	ServiceTier        string             `json:"service_tier"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               TextConfig         `json:"text"`
	ToolChoice         ToolChoice         `json:"tool_choice"`
	Tools              []Tool             `json:"tools"`
	TopLogprobs        int                `json:"top_logprobs"`
	TopP               float64            `json:"top_p"`
	PresencePenalty    float64            `json:"presence_penalty"`
	FrequencyPenalty   float64            `json:"frequency_penalty"`
	Truncation         string             `json:"truncation"`
	Usage              *Usage             `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

// ResponseError is response.error of a failed Response: {code, message}.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails is response.incomplete_details: {reason}.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Reasoning is the reasoning configuration {effort, summary}; both null when unset.
type Reasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// TextConfig is the text configuration {format, verbosity}. A nil Format encodes as
// {"type":"text"}; Verbosity defaults to "medium".
type TextConfig struct {
	Format    json.RawMessage `json:"format"`
	Verbosity string          `json:"verbosity"`
}

// MarshalJSON fills the defaults of the text configuration.
func (t TextConfig) MarshalJSON() ([]byte, error) {
	return appendTextConfig(nil, &t), nil
}

// Usage is token usage. Units are tokens of o200k_base.
type Usage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
}

// InputTokensDetails splits input tokens: CachedTokens were already in the rollout's state.
type InputTokensDetails struct {
	CachedTokens     int `json:"cached_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens"`
}

// OutputTokensDetails splits output tokens.
type OutputTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// CachedTokens is the cached_tokens to report for input tokens of which an engine said cached
// were reused: at most input, since engines count reused tokens their own way (a prefix cache
// may match more tokens than the prompt it was sent).
func CachedTokens(cached, input int) int {
	return min(cached, input)
}

// Add returns the sum of two usages (a Response's usage is the sum over its sampling steps).
func (u Usage) Add(v Usage) Usage {
	u.InputTokens += v.InputTokens
	u.InputTokensDetails.CachedTokens += v.InputTokensDetails.CachedTokens
	u.InputTokensDetails.CacheWriteTokens += v.InputTokensDetails.CacheWriteTokens
	u.OutputTokens += v.OutputTokens
	u.OutputTokensDetails.ReasoningTokens += v.OutputTokensDetails.ReasoningTokens
	u.TotalTokens = u.InputTokens + u.OutputTokens
	return u
}

// MarshalJSON encodes every ResponseResource key in the order of the struct fields: nil
// pointers are null, nil Output and Tools are [], nil Metadata is {} (keys sorted), and the
// empty strings Object, ServiceTier and Truncation become "response", "auto" and "disabled".
// Floats encode as in encoding/json; strings are not HTML-escaped.
func (r Response) MarshalJSON() ([]byte, error) {
	return appendResponse(nil, &r, nil), nil
}

// AppendJSON appends r encoded as MarshalJSON encodes it to dst and returns the extended
// buffer. A caller that knows about how long the JSON is passes a dst of that capacity, so
// that a large Response is not copied again each time the buffer grows.
func (r *Response) AppendJSON(dst []byte) []byte { return appendResponse(dst, r, nil) }
