package sampler

import (
	"testing"

	"github.com/tetherd/tether/protocol"
)

func TestCheckOutputs(t *testing.T) {
	known := func(id string) bool { return id == "call_a" || id == "call_b" || id == "call_old" }
	out := toolOutput
	cases := []struct {
		name    string
		pending []string
		input   []protocol.Item
		code    string
		param   string
		msg     string
	}{
		{"ok", []string{"call_a", "call_b"}, []protocol.Item{out("call_b", "1"), out("call_a", "2")}, "", "", ""},
		{"ok-with-messages", []string{"call_a"}, []protocol.Item{out("call_a", "1"), user("more"), user("again")}, "", "", ""},
		{"ok-no-pending", nil, []protocol.Item{user("next turn")}, "", "", ""},
		{"missing", []string{"call_a", "call_b"}, []protocol.Item{out("call_a", "1")},
			protocol.CodeMissingToolOutput, "input", "No tool output found for function call call_b."},
		{"missing-all", []string{"call_a"}, []protocol.Item{user("hi")},
			protocol.CodeMissingToolOutput, "input", "No tool output found for function call call_a."},
		{"unknown", []string{"call_a"}, []protocol.Item{out("call_x", "1")},
			protocol.CodeToolCallNotFound, "input", "No tool call found for function call output with call_id call_x."},
		{"already-answered", []string{"call_a"}, []protocol.Item{out("call_a", "1"), out("call_old", "1")},
			protocol.CodeToolCallNotFound, "input", "No tool call found for function call output with call_id call_old (that call was already answered)."},
		{"duplicate", []string{"call_a", "call_b"}, []protocol.Item{out("call_a", "1"), out("call_a", "2"), out("call_b", "3")},
			protocol.CodeDuplicateToolOutput, "input", "Duplicate tool output for function call call_a."},
		{"output-after-message", []string{"call_a"}, []protocol.Item{user("x"), out("call_a", "1")},
			protocol.CodeInvalidValue, "input[1]", ""},
		{"other-type", []string{"call_a"}, []protocol.Item{out("call_a", "1"), {Type: protocol.ItemFunctionCall, CallID: "call_z"}},
			protocol.CodeInvalidValue, "input[1].type", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutputs(tc.pending, known, tc.input)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			e, _ := protocol.AsError(err)
			if e == nil || e.Code != tc.code || e.Param != tc.param || e.Status != 400 || e.Type != protocol.TypeInvalidRequest {
				t.Fatalf("error %+v, want %s param %s", err, tc.code, tc.param)
			}
			if tc.msg != "" && e.Message != tc.msg {
				t.Fatalf("message %q, want %q", e.Message, tc.msg)
			}
		})
	}
	if err := CheckOutputs([]string{"call_a"}, nil, []protocol.Item{out("call_q", "")}); protocol.ErrorOf(err).Code != protocol.CodeToolCallNotFound {
		t.Fatalf("nil known: %v", err)
	}
}

func TestSettingsFrom(t *testing.T) {
	ins, mo, mt, par := "be brief", 100, 5, false
	p := &protocol.CreateParams{Model: "sim", Instructions: &ins, MaxOutputTokens: &mo, MaxToolCalls: &mt, ParallelToolCalls: &par,
		Tools: []protocol.Tool{weatherTool}, Metadata: map[string]string{"k": "v"}, ToolChoice: protocol.ToolChoice{Mode: "required"}}
	s := SettingsFrom(p)
	if s.Model != "sim" || s.Instructions != ins || s.MaxOutputTokens != 100 || s.MaxToolCalls != 5 || s.ParallelToolCalls ||
		len(s.Tools) != 1 || s.Metadata["k"] != "v" || s.ToolChoice.Mode != "required" {
		t.Fatalf("settings %+v", s)
	}
	if s := SettingsFrom(&protocol.CreateParams{Model: "sim"}); !s.ParallelToolCalls || s.MaxOutputTokens != 0 || s.Instructions != "" {
		t.Fatalf("defaults %+v", s)
	}
}

func toolOutput(callID, out string) protocol.Item {
	return protocol.Item{Type: protocol.ItemFunctionCallOutput, CallID: callID, Output: out}
}

var weatherTool = protocol.Tool{Type: protocol.ToolFunction, Name: "get_weather"}
