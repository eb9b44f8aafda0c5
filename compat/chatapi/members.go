package chatapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tetherd/tether/protocol"
)

// servedMembers are the top-level members of a chat completion request this server acts on
// (chatwire.Request), llama.cpp's id_slot and cache_prompt among them.
var servedMembers = []string{"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "response_format",
	"max_tokens", "max_completion_tokens", "temperature", "top_p", "presence_penalty", "frequency_penalty",
	"verbosity", "reasoning_effort", "metadata", "n", "stream", "stream_options", "id_slot", "cache_prompt"}

// advisoryMembers are OpenAI request members that do not change what is sampled (end-user
// ids, caching and storage hints, the service tier): accepted and ignored.
var advisoryMembers = []string{"user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "store", "service_tier"}

// unservedMembers are OpenAI request members that change the answer and that this server
// does not implement: given a value (anything but null, false, "", [] or {}, and
// top_logprobs 0), they are refused with unsupported_parameter rather than silently ignored.
var unservedMembers = []string{"seed", "stop", "logprobs", "top_logprobs", "logit_bias", "modalities", "audio",
	"prediction", "web_search_options", "functions", "function_call"}

// checkMembers checks body's top-level members in order (a JSON object the decoder has
// accepted; it walks the names with jsontext and skips the values, so the body is not decoded
// twice): a member OpenAI's Chat Completions does not have is 400 unknown_parameter (as OpenAI
// answers it), an unserved one with a value 400 unsupported_parameter; param is the member.
func checkMembers(body []byte) *protocol.Error {
	d := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	for d.PeekKind() == '"' {
		tok, err := d.ReadToken()
		if err != nil {
			return nil
		}
		name := tok.String()
		v, err := d.ReadValue() // read, not decoded: only the unserved members' values are looked at
		if err != nil {
			return nil
		}
		switch {
		case slices.Contains(servedMembers, name), slices.Contains(advisoryMembers, name):
		case slices.Contains(unservedMembers, name):
			if !emptyValue(json.RawMessage(v)) && (name != "top_logprobs" || string(v) != "0") {
				return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, name,
					"Unsupported parameter: '%s' is not supported by this server.", name)
			}
		default:
			return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnknownParameter, name,
				"Unrecognized request argument supplied: %s", clip(name))
		}
	}
	return nil
}

// emptyValue reports whether v is null, false, "", [] or {}.
func emptyValue(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	switch string(v) {
	case "null", "false", `""`:
		return true
	}
	if len(v) >= 2 && (v[0] == '[' || v[0] == '{') {
		return len(bytes.TrimSpace(v[1:len(v)-1])) == 0
	}
	return false
}

// clip shortens a member name for an error message.
func clip(s string) string { return protocol.Clip(s, 64) }
