package protocol

import "encoding/json"

// CreateParams is the body of POST /v1/responses and of a response.create client event (the
// flat shape). Pointer fields are nil when the client omitted them (or sent
// null). Fields the server accepts and ignores (stream, stream_options, event_id,
// client_metadata, include, prompt_cache_options, …) are not modelled; unknown top-level fields
// are ignored.
type CreateParams struct {
	Model              string
	Input              []Item
	Instructions       *string
	PreviousResponseID *string
	Tools              []Tool
	ToolChoice         ToolChoice
	ParallelToolCalls  *bool // default true
	MaxOutputTokens    *int  // tokens
	MaxToolCalls       *int
	Metadata           map[string]string
	Store              *bool // default true
	Stream             bool  // HTTP only: SSE when true; ignored on WebSocket
	Temperature        *float64
	TopP               *float64
	TopLogprobs        *int
	PresencePenalty    *float64
	FrequencyPenalty   *float64
	Reasoning          *Reasoning
	Text               *TextConfig
	Truncation         *string
	User               *string
	SafetyIdentifier   *string
	PromptCacheKey     *string
	ServiceTier        *string
	Generate           *bool   // WebSocket only; false = warm-up (public shape)
	Background         *bool   // true is rejected: unsupported_parameter
	StreamID           *string // the lane (WebSocket only; CheckStreamID); nil is the default lane
	// Include lists the extra output data asked for; message.output_text.logprobs is rejected
	// (unsupported_parameter), reasoning.encrypted_content accepted.
	Include []string
	// IncludeObfuscation is stream_options.include_obfuscation; true is rejected.
	IncludeObfuscation *bool
}

// ParallelCalls reports parallel_tool_calls with its default (true).
func (p *CreateParams) ParallelCalls() bool {
	return p.ParallelToolCalls == nil || *p.ParallelToolCalls
}

// Stored reports store with its default (true).
func (p *CreateParams) Stored() bool { return p.Store == nil || *p.Store }

// Generates reports generate with its default (true).
func (p *CreateParams) Generates() bool { return p.Generate == nil || *p.Generate }

// ClientEventType is the "type" of a client event (client → server); the constants below are
// its values. DecodeClientEvent also returns an unknown type as given, with its error.
type ClientEventType string

// Client event types (client → server).
const (
	// EventCreate is response.create: a CreateParams body (both shapes).
	EventCreate ClientEventType = "response.create"
	// EventAppend is response.append {response_id, input}: tool outputs (and optional new
	// messages) for a suspended rollout (append shape only).
	EventAppend ClientEventType = "response.append"
	// EventCancel is response.cancel {response_id}: end a running or suspended rollout
	// (append shape only).
	EventCancel ClientEventType = "response.cancel"
	// EventProcessed is response.processed {response_id}: sent by Codex; accepted, no reply.
	EventProcessed ClientEventType = "response.processed"
	// EventSteer is response.steer: answered with response.steer.failed (steering_not_supported).
	EventSteer ClientEventType = "response.steer"
)

// ClientEvent is one decoded client frame. Type selects which of the other fields is set:
// Create for response.create; ResponseID and Input for response.append; ResponseID for
// response.cancel and response.processed; Steer for response.steer.
type ClientEvent struct {
	Type       ClientEventType
	Create     *CreateParams
	ResponseID string
	Input      []Item
	Steer      json.RawMessage // the verbatim response.steer frame
}
