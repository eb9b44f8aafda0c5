package chatwire

import "encoding/json"

// Request is the body of POST /v1/chat/completions (OpenAI Chat Completions), with
// llama.cpp's id_slot and cache_prompt. Fields Tether does not use are ignored when decoding.
type Request struct {
	Model               string            `json:"model"`
	Messages            []Message         `json:"messages"`
	Tools               []Tool            `json:"tools,omitempty"`
	ToolChoice          json.RawMessage   `json:"tool_choice,omitempty"` // "auto" | "none" | "required" | {"type":"function","function":{"name":…}}
	ParallelToolCalls   *bool             `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      json.RawMessage   `json:"response_format,omitempty"` // {"type":"text"|"json_object"|"json_schema","json_schema":{…}}
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	PresencePenalty     *float64          `json:"presence_penalty,omitempty"`  // -2…2
	FrequencyPenalty    *float64          `json:"frequency_penalty,omitempty"` // -2…2
	Verbosity           string            `json:"verbosity,omitempty"`         // low, medium, high
	ReasoningEffort     string            `json:"reasoning_effort,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	N                   *int              `json:"n,omitempty"` // choices; only 1 is served
	Stream              bool              `json:"stream,omitempty"`
	StreamOptions       *StreamOptions    `json:"stream_options,omitempty"`
	// IDSlot is llama.cpp's slot id: ≥ 0 pins the request to that slot, -1 or nil lets the
	// server pick.
	IDSlot *int `json:"id_slot,omitempty"`
	// CachePrompt is llama.cpp's cache_prompt: reuse the slot's common prefix (default true).
	CachePrompt *bool `json:"cache_prompt,omitempty"`
}

// StreamOptions is a request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one chat message: role system, developer, user, assistant or tool. Content is a
// string, null, or an array of parts ({"type":"text","text":…}); ToolCalls are an assistant's
// calls; ToolCallID names the call a tool message answers.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// Tool is one entry of "tools": {"type":"function","function":{name, description?,
// parameters?, strict?}}.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction is a function tool's definition.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is an assistant's function call: in a message (ID, Type, Function complete) or a
// streamed delta (Index set; ID, Type and Function.Name on the first delta of a call,
// Function.Arguments fragments after).
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a tool call's function name and JSON arguments (text).
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Usage is a completion's token usage. PromptTokensDetails.CachedTokens is the prompt tokens
// the engine reused from its cache.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails splits prompt tokens.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Timings is llama.cpp's per-request timing object, as far as Tether fills it: CacheN prompt
// tokens reused from the slot, PromptN prompt tokens processed, PredictedN tokens generated.
type Timings struct {
	CacheN     int `json:"cache_n"`
	PromptN    int `json:"prompt_n"`
	PredictedN int `json:"predicted_n"`
}

// Chunk is one chat.completion.chunk of a stream. Usage is set on the usage chunk (with
// empty Choices) only; Timings with it (or on the finish chunk without include_usage).
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	Timings *Timings      `json:"timings,omitempty"`
	// Error is set by engines that report a failure inside the stream.
	Error *ErrorBody `json:"error,omitempty"`
}

// ChunkChoice is a chunk's choice: a Delta and, on the finish chunk, FinishReason.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is a chunk's increment of the assistant message.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// Completion is the chat.completion object of a non-streamed request.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   Usage              `json:"usage"`
	Timings *Timings           `json:"timings,omitempty"`
}

// CompletionChoice is the completion's one choice.
type CompletionChoice struct {
	Index        int             `json:"index"`
	Message      AnswerMessage   `json:"message"`
	FinishReason string          `json:"finish_reason"`
	Logprobs     json.RawMessage `json:"logprobs"`
}

// AnswerMessage is the assistant message of a Completion: Content is null when the model only
// called tools.
type AnswerMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ErrorBody is OpenAI's error object, {"message","type","param","code"}.
type ErrorBody struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Param   *string         `json:"param"`
	Code    json.RawMessage `json:"code"` // a string, a number (llama.cpp) or null
}

// ErrorEnvelope is {"error":{…}}, the body of an error reply.
type ErrorEnvelope struct {
	Error *ErrorBody `json:"error"`
}

// Finish reasons of a choice.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool_calls"
	FinishLength    = "length"
)

// Object names.
const (
	ObjectChunk      = "chat.completion.chunk"
	ObjectCompletion = "chat.completion"
)
