package compat

import (
	"bytes"
	"encoding/json"

	"github.com/tetherd/tether/protocol"
)

// hotSettingNames are the members of a settings key (protocol.AppendSettings), in order.
var hotSettingNames = []string{"model", "instructions", "tools", "tool_choice", "parallel_tool_calls", "reasoning",
	"text", "temperature", "top_p", "presence_penalty", "frequency_penalty", "max_output_tokens", "max_tool_calls",
	"truncation", "metadata"}

// encodeSettings encodes the settings of the new Response r (protocol.NewResponse of its
// request) once for the segment: its Key is what a hot-path continuation must share with its
// parent (protocol.AppendSettings: model, instructions, tools, tool_choice,
// parallel_tool_calls, reasoning, text, temperature, top_p, presence_penalty,
// frequency_penalty, max_output_tokens, max_tool_calls, truncation and metadata), with
// defaults applied, so that "omitted" and "the default" compare equal. stream,
// stream_options, store, include, client_metadata, prompt_cache_key, user, safety_identifier
// and service_tier may differ. The segment's response events copy those members from it.
func encodeSettings(r *protocol.Response) *protocol.Settings { return protocol.EncodeSettings(r) }

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
