package compat

import (
	"bytes"
	"encoding/json"

	"github.com/tetherd/tether/protocol"
)

// settingsKey encodes the settings a hot-path continuation must share with its parent: model,
// instructions, tools, tool_choice, parallel_tool_calls, reasoning, text, temperature, top_p,
// presence_penalty, frequency_penalty, max_output_tokens, max_tool_calls, truncation and
// metadata, with defaults applied, so that "omitted" and "the default" compare equal. stream, stream_options,
// store, include, client_metadata, prompt_cache_key, user, safety_identifier and service_tier
// may differ.
func settingsKey(p *protocol.CreateParams) []byte {
	r := protocol.NewResponse("", p, 0)
	b, _ := json.Marshal(struct {
		Model        string
		Instructions *string
		Tools        []protocol.Tool
		ToolChoice   protocol.ToolChoice
		Parallel     bool
		Reasoning    protocol.Reasoning
		Text         protocol.TextConfig
		Temperature  float64
		TopP         float64
		Presence     float64
		Frequency    float64
		MaxOutput    *int
		MaxToolCalls *int
		Truncation   string
		Metadata     map[string]string
	}{r.Model, r.Instructions, r.Tools, r.ToolChoice, r.ParallelToolCalls, r.Reasoning, r.Text,
		r.Temperature, r.TopP, r.PresencePenalty, r.FrequencyPenalty, r.MaxOutputTokens, r.MaxToolCalls, r.Truncation, r.Metadata})
	return b
}

func sameSettings(a, b []byte) bool { return bytes.Equal(a, b) }
