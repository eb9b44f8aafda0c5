package compat

import (
	"bytes"
	"encoding/json"

	"github.com/tetherd/tether/protocol"
)

// hotSettings is what a hot-path continuation must share with its parent, with defaults
// applied, under the Responses API's member names (settingDiff names the first that differs).
type hotSettings struct {
	Model        string              `json:"model"`
	Instructions *string             `json:"instructions"`
	Tools        []protocol.Tool     `json:"tools"`
	ToolChoice   protocol.ToolChoice `json:"tool_choice"`
	Parallel     bool                `json:"parallel_tool_calls"`
	Reasoning    protocol.Reasoning  `json:"reasoning"`
	Text         protocol.TextConfig `json:"text"`
	Temperature  float64             `json:"temperature"`
	TopP         float64             `json:"top_p"`
	Presence     float64             `json:"presence_penalty"`
	Frequency    float64             `json:"frequency_penalty"`
	MaxOutput    *int                `json:"max_output_tokens"`
	MaxToolCalls *int                `json:"max_tool_calls"`
	Truncation   string              `json:"truncation"`
	Metadata     map[string]string   `json:"metadata"`
}

// hotSettingNames are hotSettings' members in declaration order.
var hotSettingNames = []string{"model", "instructions", "tools", "tool_choice", "parallel_tool_calls", "reasoning",
	"text", "temperature", "top_p", "presence_penalty", "frequency_penalty", "max_output_tokens", "max_tool_calls",
	"truncation", "metadata"}

// settingsKey encodes the settings a hot-path continuation must share with its parent: model,
// instructions, tools, tool_choice, parallel_tool_calls, reasoning, text, temperature, top_p,
// presence_penalty, frequency_penalty, max_output_tokens, max_tool_calls, truncation and
// metadata, with defaults applied, so that "omitted" and "the default" compare equal. stream, stream_options,
// store, include, client_metadata, prompt_cache_key, user, safety_identifier and service_tier
// may differ.
func settingsKey(p *protocol.CreateParams) []byte {
	r := protocol.NewResponse("", p, 0)
	b, _ := json.Marshal(hotSettings{r.Model, r.Instructions, r.Tools, r.ToolChoice, r.ParallelToolCalls, r.Reasoning, r.Text,
		r.Temperature, r.TopP, r.PresencePenalty, r.FrequencyPenalty, r.MaxOutputTokens, r.MaxToolCalls, r.Truncation, r.Metadata})
	return b
}

func sameSettings(a, b []byte) bool { return bytes.Equal(a, b) }

// settingDiff names the first setting (in hotSettingNames order) whose encoding differs
// between the settings keys a and b, or "" when they are equal.
func settingDiff(a, b []byte) string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return ""
	}
	for _, name := range hotSettingNames {
		if !bytes.Equal(ma[name], mb[name]) {
			return name
		}
	}
	return ""
}
