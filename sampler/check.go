package sampler

import (
	"net/http"
	"strconv"

	"github.com/tetherd/tether/protocol"
)

// CheckOutputs validates the input that continues a suspended rollout (the hot path
// of the public shape, response.append): exactly one function_call_output per pending call_id, in any
// order, then optionally messages. known reports whether a call_id names a function_call of
// the chain (it may be nil). Errors (all 400, param "input", as in protocol's error table):
//
//   - an output whose call_id is not pending → tool_call_not_found
//     ("No tool call found for function call output with call_id X."); for a known call (one
//     already answered) the message adds "(that call was already answered)";
//   - a second output for a pending call → duplicate_tool_output;
//   - a pending call left without output → missing_tool_output
//     ("No tool output found for function call X.");
//   - an item that is neither a function_call_output nor a message → invalid_value (param
//     "input[i].type"), and a function_call_output after a message → invalid_value (param
//     "input[i]").
//
// It returns nil when the input is acceptable.
func CheckOutputs(pending []string, known func(callID string) bool, input []protocol.Item) error {
	const bad = http.StatusBadRequest
	answered := make([]bool, len(pending))
	sawMessage := false
	for i := range input {
		it := &input[i]
		switch it.Type {
		case protocol.ItemMessage:
			sawMessage = true
			continue
		case protocol.ItemFunctionCallOutput:
		default:
			return protocol.Errorf(bad, protocol.CodeInvalidValue, "input["+itoa(i)+"].type",
				"Invalid input item type %q: a continuation carries function_call_output items, then optionally messages.", it.Type)
		}
		if sawMessage {
			return protocol.Errorf(bad, protocol.CodeInvalidValue, "input["+itoa(i)+"]",
				"function_call_output for call_id %s comes after a message: tool outputs must come first.", it.CallID)
		}
		j := indexOf(pending, it.CallID)
		switch {
		case j < 0 && known != nil && it.CallID != "" && known(it.CallID):
			return protocol.Errorf(bad, protocol.CodeToolCallNotFound, "input",
				"No tool call found for function call output with call_id %s (that call was already answered).", it.CallID)
		case j < 0:
			return protocol.Errorf(bad, protocol.CodeToolCallNotFound, "input",
				"No tool call found for function call output with call_id %s.", it.CallID)
		case answered[j]:
			return protocol.Errorf(bad, protocol.CodeDuplicateToolOutput, "input",
				"Duplicate tool output for function call %s.", it.CallID)
		}
		answered[j] = true
	}
	for j, ok := range answered {
		if !ok {
			return protocol.Errorf(bad, protocol.CodeMissingToolOutput, "input",
				"No tool output found for function call %s.", pending[j])
		}
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i := range list {
		if list[i] == s {
			return i
		}
	}
	return -1
}

func itoa(i int) string { return strconv.Itoa(i) }

// SettingsFrom returns the generation settings of a create request: model, instructions,
// tools, tool_choice, parallel_tool_calls (default true), max_output_tokens, max_tool_calls
// (0 when absent: unlimited), temperature, top_p, presence_penalty, frequency_penalty,
// text.format, text.verbosity, reasoning.effort and metadata.
// Slices and maps are shared with p.
func SettingsFrom(p *protocol.CreateParams) Settings {
	s := Settings{
		Model:             p.Model,
		Tools:             p.Tools,
		ToolChoice:        p.ToolChoice,
		ParallelToolCalls: p.ParallelCalls(),
		Temperature:       p.Temperature,
		TopP:              p.TopP,
		PresencePenalty:   p.PresencePenalty,
		FrequencyPenalty:  p.FrequencyPenalty,
		Metadata:          p.Metadata,
	}
	if p.Instructions != nil {
		s.Instructions = *p.Instructions
	}
	if p.MaxOutputTokens != nil && *p.MaxOutputTokens > 0 {
		s.MaxOutputTokens = *p.MaxOutputTokens
	}
	if p.MaxToolCalls != nil && *p.MaxToolCalls > 0 {
		s.MaxToolCalls = *p.MaxToolCalls
	}
	if p.Text != nil && len(p.Text.Format) > 0 && string(p.Text.Format) != "null" {
		s.TextFormat = p.Text.Format
	}
	if p.Text != nil {
		s.Verbosity = p.Text.Verbosity
	}
	if p.Reasoning != nil && p.Reasoning.Effort != nil {
		s.ReasoningEffort = *p.Reasoning.Effort
	}
	return s
}
