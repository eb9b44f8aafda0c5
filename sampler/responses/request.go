package responses

import (
	"encoding/json"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// createFrame is the response.create client event sent upstream (flat shape).
// Optional settings are omitted when the rollout left them to the engine's default.
type createFrame struct {
	Type               protocol.ClientEventType `json:"type"`
	Model              string                   `json:"model,omitempty"`
	PreviousResponseID string                   `json:"previous_response_id,omitempty"`
	Instructions       string                   `json:"instructions,omitempty"`
	Input              []protocol.Item          `json:"input"`
	Tools              []protocol.Tool          `json:"tools,omitempty"`
	ToolChoice         *protocol.ToolChoice     `json:"tool_choice,omitempty"`
	ParallelToolCalls  bool                     `json:"parallel_tool_calls"`
	MaxOutputTokens    int                      `json:"max_output_tokens,omitempty"`
	MaxToolCalls       int                      `json:"max_tool_calls,omitempty"`
	Temperature        *float64                 `json:"temperature,omitempty"`
	TopP               *float64                 `json:"top_p,omitempty"`
	PresencePenalty    *float64                 `json:"presence_penalty,omitempty"`
	FrequencyPenalty   *float64                 `json:"frequency_penalty,omitempty"`
	Text               *textParam               `json:"text,omitempty"`
	Reasoning          *reasoningParam          `json:"reasoning,omitempty"`
	Metadata           map[string]string        `json:"metadata,omitempty"`
	Store              bool                     `json:"store"`
	// Generate false is a warm-up; nil: generate.
	Generate *bool `json:"generate,omitempty"`
}

type textParam struct {
	Format    json.RawMessage `json:"format,omitempty"`
	Verbosity string          `json:"verbosity,omitempty"`
}

type reasoningParam struct {
	Effort string `json:"effort"`
}

// newCreate returns the response.create of a step: the rollout's settings (the same for
// every step of a chain, so that the upstream's hot path accepts the continuation), maxCalls
// as max_tool_calls (0: omitted), prev as previous_response_id ("" starts a chain) and input.
func newCreate(s *sampler.Settings, maxCalls int, prev string, input []protocol.Item) *createFrame {
	f := &createFrame{
		Type: protocol.EventCreate, Model: s.Model, PreviousResponseID: prev,
		Instructions: s.Instructions, Input: input, Tools: s.Tools,
		ParallelToolCalls: s.ParallelToolCalls, MaxOutputTokens: s.MaxOutputTokens,
		MaxToolCalls: maxCalls, Temperature: s.Temperature, TopP: s.TopP,
		PresencePenalty: s.PresencePenalty, FrequencyPenalty: s.FrequencyPenalty, Metadata: s.Metadata,
	}
	if tc := s.ToolChoice; tc.Mode != "" || tc.Name != "" || len(tc.Raw) > 0 {
		f.ToolChoice = &tc
	}
	if len(s.TextFormat) > 0 || s.Verbosity != "" {
		f.Text = &textParam{Format: s.TextFormat, Verbosity: s.Verbosity}
	}
	if s.ReasoningEffort != "" {
		f.Reasoning = &reasoningParam{Effort: s.ReasoningEffort}
	}
	return f
}

// inputItems converts items to upstream input items: messages, function_call and
// function_call_output lose their ids and statuses (Tether's ids mean nothing upstream), and a
// function_call_output's call_id is mapped through callIDs (Tether's → the upstream's) when
// the rollout replaced the upstream's. Other item types are sent as received.
func inputItems(items []protocol.Item, callIDs map[string]string) []protocol.Item {
	out := make([]protocol.Item, 0, len(items))
	for _, it := range items {
		switch it.Type {
		case protocol.ItemMessage, protocol.ItemFunctionCall, protocol.ItemFunctionCallOutput:
			it.ID, it.Status = "", ""
		}
		if it.Type == protocol.ItemFunctionCallOutput {
			if id, ok := callIDs[it.CallID]; ok {
				it.CallID = id
			}
		}
		out = append(out, it)
	}
	return out
}
