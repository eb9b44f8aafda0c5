package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// badFrames lists one row per bad-frame case of the error table that the decoder answers.
var badFrames = []struct {
	name   string
	frame  string
	status int
	code   string
	param  string
}{
	{"not json", `hello`, 400, CodeInvalidJSON, ""},
	{"empty", ``, 400, CodeInvalidJSON, ""},
	{"truncated", `{"type":"response.create","model":"m"`, 400, CodeInvalidJSON, ""},
	{"trailing garbage", `{"type":"response.cancel","response_id":"r"} x`, 400, CodeInvalidJSON, ""},
	{"array", `[{"type":"response.create"}]`, 400, CodeInvalidJSON, ""},
	{"string", `"response.create"`, 400, CodeInvalidJSON, ""},
	{"number", `42`, 400, CodeInvalidJSON, ""},
	{"type missing", `{"model":"m"}`, 400, CodeMissingRequiredParameter, "type"},
	{"type null", `{"type":null,"model":"m"}`, 400, CodeMissingRequiredParameter, "type"},
	{"type not string", `{"type":7}`, 400, CodeInvalidType, "type"},
	{"unknown type", `{"type":"response.foo"}`, 400, CodeUnknownEventType, "type"},
	{"empty type", `{"type":""}`, 400, CodeUnknownEventType, "type"},
	{"missing model", `{"type":"response.create","input":"hi"}`, 400, CodeMissingRequiredParameter, "model"},
	{"null model", `{"type":"response.create","model":null}`, 400, CodeMissingRequiredParameter, "model"},
	{"empty model", `{"type":"response.create","model":""}`, 400, CodeMissingRequiredParameter, "model"},
	{"model number", `{"type":"response.create","model":5}`, 400, CodeInvalidType, "model"},
	{"input number", `{"type":"response.create","model":"m","input":5}`, 400, CodeInvalidType, "input"},
	{"input item not object", `{"type":"response.create","model":"m","input":["hi"]}`, 400, CodeInvalidType, "input[0]"},
	{"content number", `{"type":"response.create","model":"m","input":[{"role":"user","content":3}]}`, 400, CodeInvalidType, "input[0].content"},
	{"part text number", `{"type":"response.create","model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":1}]}]}`, 400, CodeInvalidType, "input[0].content[1].text"},
	{"part text missing", `{"type":"response.create","model":"m","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, 400, CodeMissingRequiredParameter, "input[0].content[0].text"},
	{"part type missing", `{"type":"response.create","model":"m","input":[{"role":"user","content":[{"text":"x"}]}]}`, 400, CodeMissingRequiredParameter, "input[0].content[0].type"},
	{"role wizard", `{"type":"response.create","model":"m","input":[{"role":"wizard","content":"hi"}]}`, 400, CodeInvalidValue, "input[0].role"},
	{"role missing", `{"type":"response.create","model":"m","input":[{"type":"message","content":"hi"}]}`, 400, CodeMissingRequiredParameter, "input[0].role"},
	{"content missing", `{"type":"response.create","model":"m","input":[{"role":"user"}]}`, 400, CodeMissingRequiredParameter, "input[0].content"},
	{"item type missing", `{"type":"response.create","model":"m","input":[{"content":"hi"}]}`, 400, CodeMissingRequiredParameter, "input[0].type"},
	{"item type number", `{"type":"response.create","model":"m","input":[{"type":1}]}`, 400, CodeInvalidType, "input[0].type"},
	{"item status bad", `{"type":"response.create","model":"m","input":[{"role":"user","content":"x","status":"done"}]}`, 400, CodeInvalidValue, "input[0].status"},
	{"function_call no name", `{"type":"response.create","model":"m","input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, 400, CodeMissingRequiredParameter, "input[0].name"},
	{"function_call arguments object", `{"type":"response.create","model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]}`, 400, CodeInvalidType, "input[0].arguments"},
	{"function_call_output no call_id", `{"type":"response.create","model":"m","input":[{"type":"function_call_output","output":"x"}]}`, 400, CodeMissingRequiredParameter, "input[0].call_id"},
	{"function_call_output no output", `{"type":"response.create","model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, 400, CodeMissingRequiredParameter, "input[0].output"},
	{"function_call_output output number", `{"type":"response.create","model":"m","input":[{"type":"function_call_output","call_id":"c","output":1}]}`, 400, CodeInvalidType, "input[0].output"},
	{"instructions number", `{"type":"response.create","model":"m","instructions":1}`, 400, CodeInvalidType, "instructions"},
	{"tools object", `{"type":"response.create","model":"m","tools":{}}`, 400, CodeInvalidType, "tools"},
	{"tool name number", `{"type":"response.create","model":"m","tools":[{"type":"function","name":1}]}`, 400, CodeInvalidType, "tools[0].name"},
	{"tool name missing", `{"type":"response.create","model":"m","tools":[{"type":"custom","name":"x"},{"type":"function"}]}`, 400, CodeMissingRequiredParameter, "tools[1].name"},
	{"tool type missing", `{"type":"response.create","model":"m","tools":[{"name":"x"}]}`, 400, CodeMissingRequiredParameter, "tools[0].type"},
	{"tool parameters string", `{"type":"response.create","model":"m","tools":[{"type":"function","name":"f","parameters":"{}"}]}`, 400, CodeInvalidType, "tools[0].parameters"},
	{"tool strict string", `{"type":"response.create","model":"m","tools":[{"type":"function","name":"f","strict":"yes"}]}`, 400, CodeInvalidType, "tools[0].strict"},
	{"tool_choice bad mode", `{"type":"response.create","model":"m","tool_choice":"sometimes"}`, 400, CodeInvalidValue, "tool_choice"},
	{"tool_choice number", `{"type":"response.create","model":"m","tool_choice":1}`, 400, CodeInvalidType, "tool_choice"},
	{"tool_choice function without name", `{"type":"response.create","model":"m","tool_choice":{"type":"function"}}`, 400, CodeMissingRequiredParameter, "tool_choice.name"},
	{"max_output_tokens string", `{"type":"response.create","model":"m","max_output_tokens":"10"}`, 400, CodeInvalidType, "max_output_tokens"},
	{"max_output_tokens negative", `{"type":"response.create","model":"m","max_output_tokens":-1}`, 400, CodeIntegerBelowMin, "max_output_tokens"},
	{"max_output_tokens zero", `{"type":"response.create","model":"m","max_output_tokens":0}`, 400, CodeIntegerBelowMin, "max_output_tokens"},
	{"max_output_tokens 1", `{"type":"response.create","model":"m","input":"Hello","max_output_tokens":1}`, 400, CodeIntegerBelowMin, "max_output_tokens"},
	{"top_p above 1", `{"type":"response.create","model":"m","top_p":1.5}`, 400, CodeDecimalAboveMax, "top_p"},
	{"effort unknown", `{"type":"response.create","model":"m","reasoning":{"effort":"max"}}`, 400, CodeInvalidValue, "reasoning.effort"},
	{"prompt_cache_key too long", `{"type":"response.create","model":"m","prompt_cache_key":"` + strings.Repeat("k", 65) + `"}`, 400, CodeStringAboveMaxLength, "prompt_cache_key"},
	{"empty call_id", `{"type":"response.create","model":"m","input":[{"type":"function_call_output","call_id":"","output":"x"}]}`, 400, CodeStringBelowMinLength, "input[0].call_id"},
	{"max_output_tokens fraction", `{"type":"response.create","model":"m","max_output_tokens":10.5}`, 400, CodeInvalidType, "max_output_tokens"},
	{"max_output_tokens huge", `{"type":"response.create","model":"m","max_output_tokens":1e300}`, 400, CodeInvalidType, "max_output_tokens"},
	{"max_tool_calls negative", `{"type":"response.create","model":"m","max_tool_calls":-2}`, 400, CodeIntegerBelowMin, "max_tool_calls"},
	{"temperature 1e400", `{"type":"response.create","model":"m","temperature":1e400}`, 400, CodeInvalidType, "temperature"},
	{"temperature string", `{"type":"response.create","model":"m","temperature":"hot"}`, 400, CodeInvalidType, "temperature"},
	{"1e400 in a skipped field", `{"type":"response.create","model":"m","client_metadata":{"a":[1,-1e400]}}`, 400, CodeInvalidType, "client_metadata.a[1]"},
	{"unknown create member", `{"type":"response.create","model":"m","input":"hi","temprature":0.5}`, 400, CodeUnknownParameter, "temprature"},
	{"unknown member before model", `{"type":"response.create","seed":1,"model":"m"}`, 400, CodeUnknownParameter, "seed"},
	{"unknown append member", `{"type":"response.append","response_id":"r","input":[],"model":"m"}`, 400, CodeUnknownParameter, "model"},
	{"unknown cancel member", `{"type":"response.cancel","response_id":"r","input":[]}`, 400, CodeUnknownParameter, "input"},
	{"unknown processed member", `{"type":"response.processed","response_id":"r","x":1}`, 400, CodeUnknownParameter, "x"},
	{"1e400 in ignored field", `{"type":"response.create","model":"m","stream_options":{"n":1E+999}}`, 400, CodeInvalidType, "stream_options.n"},
	{"1e400 in raw tool", `{"type":"response.create","model":"m","tools":[{"type":"custom","name":"c","n":1e400}]}`, 400, CodeInvalidType, "tools[0].n"},
	{"1e400 in append", `{"type":"response.append","response_id":"r","input":[],"event_id":1e400}`, 400, CodeInvalidType, "event_id"},
	{"event_id object in create", `{"type":"response.create","model":"m","event_id":{}}`, 400, CodeInvalidType, "event_id"},
	{"event_id number in create", `{"type":"response.create","event_id":7,"model":"m"}`, 400, CodeInvalidType, "event_id"},
	{"event_id array in append", `{"type":"response.append","response_id":"r","input":[],"event_id":["e"]}`, 400, CodeInvalidType, "event_id"},
	{"event_id boolean in cancel", `{"type":"response.cancel","event_id":true,"response_id":"r"}`, 400, CodeInvalidType, "event_id"},
	{"event_id object in processed", `{"type":"response.processed","response_id":"r","event_id":{"id":"e"}}`, 400, CodeInvalidType, "event_id"},
	{"1e400 in steer", `{"type":"response.steer","input":[1e400]}`, 400, CodeInvalidType, "input[0]"},
	{"metadata value number", `{"type":"response.create","model":"m","metadata":{"foo":1}}`, 400, CodeInvalidType, "metadata.foo"},
	{"metadata array", `{"type":"response.create","model":"m","metadata":["a"]}`, 400, CodeInvalidType, "metadata"},
	{"metadata value too long", `{"type":"response.create","model":"m","metadata":{"foo":"` + strings.Repeat("é", 513) + `"}}`, 400, CodeInvalidValue, "metadata.foo"},
	{"metadata too many keys", `{"type":"response.create","model":"m","metadata":{` + manyKeys(17) + `}}`, 400, CodeInvalidValue, "metadata"},
	{"metadata key too long", `{"type":"response.create","model":"m","metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, 400, CodeInvalidValue, "metadata"},
	{"parallel_tool_calls string", `{"type":"response.create","model":"m","parallel_tool_calls":"true"}`, 400, CodeInvalidType, "parallel_tool_calls"},
	{"store number", `{"type":"response.create","model":"m","store":0}`, 400, CodeInvalidType, "store"},
	{"stream string", `{"type":"response.create","model":"m","stream":"yes"}`, 400, CodeInvalidType, "stream"},
	{"generate string", `{"type":"response.create","model":"m","generate":"no"}`, 400, CodeInvalidType, "generate"},
	{"background number", `{"type":"response.create","model":"m","background":1}`, 400, CodeInvalidType, "background"},
	{"stream_id number", `{"type":"response.create","model":"m","stream_id":1}`, 400, CodeInvalidStreamID, "stream_id"},
	{"stream_id array", `{"type":"response.create","model":"m","stream_id":["x"]}`, 400, CodeInvalidStreamID, "stream_id"},
	{"truncation bad", `{"type":"response.create","model":"m","truncation":"sometimes"}`, 400, CodeInvalidValue, "truncation"},
	{"verbosity bad", `{"type":"response.create","model":"m","text":{"verbosity":"loud"}}`, 400, CodeInvalidValue, "text.verbosity"},
	{"text format string", `{"type":"response.create","model":"m","text":{"format":"text"}}`, 400, CodeInvalidType, "text.format"},
	{"reasoning effort number", `{"type":"response.create","model":"m","reasoning":{"effort":1}}`, 400, CodeInvalidType, "reasoning.effort"},
	{"reasoning string", `{"type":"response.create","model":"m","reasoning":"high"}`, 400, CodeInvalidType, "reasoning"},
	{"previous_response_id number", `{"type":"response.create","model":"m","previous_response_id":1}`, 400, CodeInvalidType, "previous_response_id"},
	{"user object", `{"type":"response.create","model":"m","user":{}}`, 400, CodeInvalidType, "user"},
	{"append without response_id", `{"type":"response.append","input":[]}`, 400, CodeMissingRequiredParameter, "response_id"},
	{"append response_id number", `{"type":"response.append","response_id":1,"input":[]}`, 400, CodeInvalidType, "response_id"},
	{"append without input", `{"type":"response.append","response_id":"r"}`, 400, CodeMissingRequiredParameter, "input"},
	{"append input not array", `{"type":"response.append","response_id":"r","input":"hi"}`, 400, CodeInvalidType, "input"},
	{"append bad item", `{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":"x"},{"type":"function_call_output","output":"y"}]}`, 400, CodeMissingRequiredParameter, "input[1].call_id"},
	{"cancel without response_id", `{"type":"response.cancel"}`, 400, CodeMissingRequiredParameter, "response_id"},
	{"processed without response_id", `{"type":"response.processed","response_id":null}`, 400, CodeMissingRequiredParameter, "response_id"},
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k`)
		b.WriteString(strings.Repeat("x", i))
		b.WriteString(`":"v"`)
	}
	return b.String()
}

func TestDecodeBadFrames(t *testing.T) {
	for _, tc := range badFrames {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := DecodeClientEvent(context.Background(), []byte(tc.frame))
			if err == nil {
				t.Fatalf("decoded %+v, want error %s", ev, tc.code)
			}
			if err.Status != tc.status || err.Code != tc.code || err.Param != tc.param || err.Type != TypeInvalidRequest {
				t.Errorf("got %d %s %s param %q (%s), want %d %s param %q", err.Status, err.Type, err.Code, err.Param, err.Message, tc.status, tc.code, tc.param)
			}
			if err.Message == "" || !strings.HasSuffix(err.Message, ".") {
				t.Errorf("message %q: want a sentence", err.Message)
			}
		})
	}
}

func TestDecodeErrorMessages(t *testing.T) {
	for _, tc := range []struct{ frame, msg string }{
		{`{"type":"response.create"}`, "Missing required parameter: 'model'."},
		{`{"type":"response.create","model":"m","input":[{"role":"user","content":1}]}`, "Invalid type for 'input[0].content': expected a string or an array of content parts, but got a number."},
		{`{"type":"response.create","model":"m","input":[{"role":"wizard","content":"x"}]}`, "Invalid value: 'wizard'. Supported values are: 'user', 'assistant', 'system', and 'developer'."},
		{`{"type":"foo"}`, "Unknown event type 'foo'. Supported types are: 'response.create', 'response.append', 'response.cancel', 'response.processed', and 'response.steer'."},
		{`{"type":`, "The frame is not valid JSON: unexpected end of JSON input."},
		{`[]`, "The frame is not valid JSON: expected an object, but got an array."},
		{`{"type":"response.create","model":"m","temperature":1e400}`, "Invalid type for 'temperature': the number 1e400 is out of range."},
		{`{"type":"response.create","model":"m","max_output_tokens":0}`, "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 0 instead."},
	} {
		_, err := DecodeClientEvent(context.Background(), []byte(tc.frame))
		if err == nil || err.Message != tc.msg {
			t.Errorf("%s:\n got %v\nwant %q", tc.frame, err, tc.msg)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// codexCreate is shaped like what Codex sends on a WebSocket.
const codexCreate = `{
  "type": "response.create",
  "model": "gpt-5.6-codex",
  "instructions": "You are Codex.",
  "input": [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>sandbox</permissions>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}, {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.go\nb.go\n"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files.", "annotations": []}], "phase": "final_answer"},
    {"role": "user", "content": "and now?"}
  ],
  "tools": [
    {"type": "function", "name": "exec_command", "description": "Run a command", "strict": false,
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
    {"type": "namespace", "name": "mcp__fs", "tools": [{"type": "function", "name": "read"}]},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}},
    {"type": "web_search"}
  ],
  "tool_choice": "auto",
  "parallel_tool_calls": true,
  "reasoning": {"effort": "medium", "summary": "auto"},
  "store": false,
  "stream": true,
  "include": ["reasoning.encrypted_content"],
  "prompt_cache_key": "sess-1",
  "client_metadata": {"x-codex-turn": "1"},
  "text": {"verbosity": "low", "format": {"type": "json_schema", "name": "x", "schema": {}}},
  "generate": false,
  "service_tier": "priority",
  "metadata": {"sim.parallel": "2"},
  "event_id": "evt_1",
  "prompt_cache_retention": "in-memory"
}`

func TestDecodeCodexCreate(t *testing.T) {
	ev, err := DecodeClientEvent(context.Background(), []byte(codexCreate))
	if err != nil {
		t.Fatal(err)
	}
	want := &CreateParams{
		Model:        "gpt-5.6-codex",
		Instructions: ptr("You are Codex."),
		Input: []Item{
			{Type: ItemMessage, Role: RoleDeveloper, Content: []ContentPart{{Type: PartInputText, Text: "<permissions>sandbox</permissions>"}}},
			{Type: ItemMessage, Role: RoleUser, Content: []ContentPart{
				{Type: PartInputText, Text: "list files"},
				{Type: "input_image", Raw: json.RawMessage(`{"type":"input_image","image_url":"data:image/png;base64,AAAA"}`)},
			}},
			{Type: ItemReasoning, ID: "rs_1", Raw: json.RawMessage(`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"}`)},
			{Type: ItemFunctionCall, ID: "fc_1", CallID: "call_1", Name: "exec_command", Arguments: `{"cmd":"ls"}`},
			{Type: ItemFunctionCallOutput, CallID: "call_1", Output: "a.go\nb.go\n"},
			{Type: ItemMessage, Role: RoleAssistant, Content: []ContentPart{{Type: PartOutputText, Text: "Two files."}}},
			{Type: ItemMessage, Role: RoleUser, Content: []ContentPart{{Type: PartInputText, Text: "and now?"}}},
		},
		Tools: []Tool{
			{Type: ToolFunction, Name: "exec_command", Description: ptr("Run a command"), Strict: ptr(false),
				Parameters: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`)},
			{Type: "namespace", Raw: json.RawMessage(`{"type":"namespace","name":"mcp__fs","tools":[{"type":"function","name":"read"}]}`)},
			{Type: "custom", Raw: json.RawMessage(`{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}`)},
			{Type: "web_search", Raw: json.RawMessage(`{"type":"web_search"}`)},
		},
		ToolChoice:        ToolChoice{Mode: ToolChoiceAuto},
		ParallelToolCalls: ptr(true),
		Reasoning:         &Reasoning{Effort: ptr("medium"), Summary: ptr("auto")},
		Store:             ptr(false),
		Stream:            true,
		PromptCacheKey:    ptr("sess-1"),
		Text:              &TextConfig{Verbosity: "low", Format: json.RawMessage(`{"type":"json_schema","name":"x","description":null,"schema":{},"strict":false}`)},
		Generate:          ptr(false),
		ServiceTier:       ptr("priority"),
		Metadata:          map[string]string{"sim.parallel": "2"},
		Include:           []string{"reasoning.encrypted_content"},
	}
	if ev.Type != EventCreate || !reflect.DeepEqual(ev.Create, want) {
		t.Errorf("got  %#v\nwant %#v", ev.Create, want)
	}
	if ev.Create.Stored() || ev.Create.Generates() || !ev.Create.ParallelCalls() {
		t.Error("defaults helpers disagree with the decoded values")
	}
}

func TestDecodeGoodFrames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame string
		want  ClientEvent
	}{
		{"string input", `{"type":"response.create","model":"sim","input":"Weather in Paris?"}`,
			ClientEvent{Type: EventCreate, Create: &CreateParams{Model: "sim", Input: []Item{
				{Type: ItemMessage, Role: RoleUser, Content: []ContentPart{{Type: PartInputText, Text: "Weather in Paris?"}}}}}}},
		{"type last, escapes, nulls", `{"model":"sim","input":[],"instructions":null,"tools":null,"tool_choice":null,"metadata":null,"temperature":null,"max_output_tokens":null,"type":"response.cre\u0061te"}`,
			ClientEvent{Type: EventCreate, Create: &CreateParams{Model: "sim", Input: []Item{}}}},
		{"easy messages", `{"type":"response.create","model":"sim","input":[{"role":"system","content":"Be brief."},{"role":"assistant","content":"Hi <b>&</b>"},{"role":"user","content":[]}]}`,
			ClientEvent{Type: EventCreate, Create: &CreateParams{Model: "sim", Input: []Item{
				{Type: ItemMessage, Role: RoleSystem, Content: []ContentPart{{Type: PartInputText, Text: "Be brief."}}},
				{Type: ItemMessage, Role: RoleAssistant, Content: []ContentPart{{Type: PartOutputText, Text: "Hi <b>&</b>"}}},
				{Type: ItemMessage, Role: RoleUser, Content: []ContentPart{}},
			}}}},
		{"settings", `{"type":"response.create","model":"sim","temperature":0.2,"top_p":1,"top_logprobs":0,"max_output_tokens":1e3,"max_tool_calls":5.0,"truncation":"auto","tools":[{"type":"function","name":"get_time"}],"tool_choice":{"type":"function","name":"get_time"},"background":false,"stream_id":"main","user":"u","safety_identifier":"s","previous_response_id":"resp_1","presence_penalty":-0.5,"frequency_penalty":0}`,
			ClientEvent{Type: EventCreate, Create: &CreateParams{Model: "sim", Temperature: ptr(0.2), TopP: ptr(1.0), TopLogprobs: ptr(0),
				MaxOutputTokens: ptr(1000), MaxToolCalls: ptr(5), Truncation: ptr("auto"), ToolChoice: ToolChoice{Name: "get_time"}, Tools: []Tool{{Type: ToolFunction, Name: "get_time"}},
				Background: ptr(false), StreamID: ptr("main"), User: ptr("u"), SafetyIdentifier: ptr("s"), PreviousResponseID: ptr("resp_1"),
				PresencePenalty: ptr(-0.5), FrequencyPenalty: ptr(0.0)}}},
		{"tool_choice allowed_tools", `{"type":"response.create","model":"sim","tools":[{"type":"function","name":"get_time"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"get_time"}]}}`,
			ClientEvent{Type: EventCreate, Create: &CreateParams{Model: "sim", Tools: []Tool{{Type: ToolFunction, Name: "get_time"}},
				ToolChoice: ToolChoice{Mode: ToolChoiceRequired, Allowed: []string{"get_time"}, Raw: json.RawMessage(`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"get_time"}]}`)}}}},
		{"append", `{"type":"response.append","response_id":"resp_A","input":[{"type":"function_call_output","call_id":"call_b","output":"14:05"},{"type":"function_call_output","call_id":"call_a","output":[{"type":"input_text","text":"18"},{"type":"input_image","file_id":"f"},{"type":"input_text","text":"C"}]},{"role":"user","content":"thanks"}]}`,
			ClientEvent{Type: EventAppend, ResponseID: "resp_A", Input: []Item{
				{Type: ItemFunctionCallOutput, CallID: "call_b", Output: "14:05"},
				{Type: ItemFunctionCallOutput, CallID: "call_a", Output: "18C", OutputParts: []ContentPart{
					{Type: PartInputText, Text: "18"}, {Type: "input_image", Raw: json.RawMessage(`{"type":"input_image","file_id":"f"}`)}, {Type: PartInputText, Text: "C"}}},
				{Type: ItemMessage, Role: RoleUser, Content: []ContentPart{{Type: PartInputText, Text: "thanks"}}},
			}}},
		{"append empty input", `{"type":"response.append","response_id":"resp_A","input":[]}`,
			ClientEvent{Type: EventAppend, ResponseID: "resp_A", Input: []Item{}}},
		{"cancel", `{"type":"response.cancel","response_id":"resp_A","event_id":"e"}`, ClientEvent{Type: EventCancel, ResponseID: "resp_A"}},
		{"processed", `{"type":"response.processed","response_id":"resp_A"}`, ClientEvent{Type: EventProcessed, ResponseID: "resp_A"}},
		{"processed with event_id", `{"type":"response.processed","event_id":"e","response_id":"resp_A"}`, ClientEvent{Type: EventProcessed, ResponseID: "resp_A"}},
		{"append with event_id", `{"event_id":"e","type":"response.append","response_id":"resp_A","input":[]}`,
			ClientEvent{Type: EventAppend, ResponseID: "resp_A", Input: []Item{}}},
		{"steer", `{"type":"response.steer","previous_response_id":"resp_1","input":"Prioritize."}`,
			ClientEvent{Type: EventSteer, Steer: json.RawMessage(`{"type":"response.steer","previous_response_id":"resp_1","input":"Prioritize."}`)}},
		{"1e-400 underflows to 0", `{"type":"response.create","model":"m","temperature":1e-400}`,
			ClientEvent{Type: EventCreate, Create: &CreateParams{Model: "m", Temperature: ptr(0.0)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := DecodeClientEvent(context.Background(), []byte(tc.frame))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ev, tc.want) {
				t.Errorf("got  %#v\nwant %#v", ev, tc.want)
				if ev.Create != nil && tc.want.Create != nil {
					t.Errorf("create got  %#v\nwant %#v", *ev.Create, *tc.want.Create)
				}
			}
		})
	}
}

// TestDecodeDoesNotRetain checks that the decoded event survives reuse of the frame buffer.
func TestDecodeDoesNotRetain(t *testing.T) {
	frame := []byte(`{"type":"response.append","response_id":"resp_A","input":[{"type":"reasoning","id":"rs_1"},{"type":"function_call_output","call_id":"c","output":"o"}]}`)
	ev, err := DecodeClientEvent(context.Background(), frame)
	if err != nil {
		t.Fatal(err)
	}
	want := appendItems(nil, ev.Input)
	for i := range frame {
		frame[i] = 'x'
	}
	if got := appendItems(nil, ev.Input); !bytes.Equal(got, want) || ev.ResponseID != "resp_A" {
		t.Errorf("decoded event changed with the frame buffer: %s", got)
	}
}

func TestDecodeCreateParams(t *testing.T) {
	cp, err := DecodeCreateParams(context.Background(), []byte(`{"model":"m","input":"hi","stream":true}`))
	if err != nil || cp.Model != "m" || !cp.Stream || len(cp.Input) != 1 {
		t.Fatalf("got %+v, %v", cp, err)
	}
	if _, err := DecodeCreateParams(context.Background(), []byte(`{"input":"hi"}`)); err == nil || err.Param != "model" {
		t.Fatalf("missing model: got %v", err)
	}
	if _, err := DecodeCreateParams(context.Background(), []byte(`{"type":"response.create","model":"m"}`)); err != nil {
		t.Fatalf("a POST body with type: %v", err)
	}
	for body, msg := range map[string]string{
		`{"model":`:                 "The request body is not valid JSON: unexpected end of JSON input.",
		`[]`:                        "The request body is not valid JSON: expected an object, but got an array.",
		"{\"model\":\"\xff\"}":      "The request body is not valid UTF-8: JSON text must be UTF-8 (RFC 8259).",
		`{"model":"m","model":"n"}`: "Duplicate key 'model' in the request body: each top-level member may appear once.",
	} {
		if _, err := DecodeCreateParams(context.Background(), []byte(body)); err == nil || err.Message != msg {
			t.Errorf("%q: got %v, want %q", body, err, msg)
		}
	}
	_, err = DecodeCreateParams(context.Background(), []byte(`{"model":"m","temprature":0.5}`))
	if err == nil || err.Status != 400 || err.Code != CodeUnknownParameter || err.Param != "temprature" ||
		err.Message != "Unknown parameter: 'temprature'." {
		t.Fatalf("unknown member: got %v", err)
	}
}

// TestCreateFieldsAccepted checks that every member of CreateFields is known to the decoder,
// in a WebSocket frame and in a POST body: null is accepted for all of them.
func TestCreateFieldsAccepted(t *testing.T) {
	for _, f := range CreateFields {
		if f.Name == "model" {
			continue
		}
		body := `{"model":"m","` + f.Name + `":null}`
		if _, err := DecodeCreateParams(context.Background(), []byte(body)); err != nil {
			t.Errorf("POST body %s: %v", body, err)
		}
		frame := `{"type":"response.create",` + body[1:]
		if _, err := DecodeClientEvent(context.Background(), []byte(frame)); err != nil {
			t.Errorf("frame %s: %v", frame, err)
		}
	}
}

func TestItemJSONRoundTrip(t *testing.T) {
	ev, err := DecodeClientEvent(context.Background(), []byte(codexCreate))
	if err != nil {
		t.Fatal(err)
	}
	b, jerr := json.Marshal(ev.Create.Input)
	if jerr != nil {
		t.Fatal(jerr)
	}
	var items []Item
	if jerr := json.Unmarshal(b, &items); jerr != nil {
		t.Fatal(jerr)
	}
	if !reflect.DeepEqual(items, ev.Create.Input) {
		t.Errorf("round trip through encoding/json:\n got %#v\nwant %#v", items, ev.Create.Input)
	}
	var it Item
	jerr = json.Unmarshal([]byte(`{"role":"wizard","content":"x"}`), &it)
	if e, ok := AsError(jerr); !ok || e.Code != CodeInvalidValue || e.Param != "role" {
		t.Errorf("Item.UnmarshalJSON: got %v", jerr)
	}
}

// whitespaceOutput is a function_call_output of 200 KB of " \n" (the renderer's
// pathological tokenizer input).
func whitespaceOutput() string {
	out, _ := json.Marshal(strings.Repeat(" \n", 100_000))
	return `{"type":"response.append","response_id":"resp_A","input":[{"type":"function_call_output","call_id":"call_a","output":` + string(out) + `}]}`
}

func TestDecodeWhitespaceOutput(t *testing.T) {
	ev, err := DecodeClientEvent(context.Background(), []byte(whitespaceOutput()))
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Input[0].Output; len(got) != 200_000 || strings.Trim(got, " \n") != "" {
		t.Errorf("output mangled: %d bytes", len(got))
	}
}

func FuzzDecodeClientEvent(f *testing.F) {
	for _, tc := range badFrames {
		f.Add([]byte(tc.frame))
	}
	f.Add([]byte(codexCreate))
	f.Add([]byte(whitespaceOutput()))
	for _, s := range []string{
		`{"type":"response.create","model":"sim","input":"hi"}`,
		`{"type":"response.create","model":"sim","input":[{"role":"user","content":"a\u2028b\u0000"}]}`,
		`{"type":"response.append","response_id":"r","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]}`,
		`{"type":"response.cancel","response_id":"r"}`,
		`{"type":"response.steer","input":"x"}`,
		`{"type":"response.create","model":"m","input":[{"type":"item_reference","id":"msg_1"}],"tool_choice":{"type":"function","name":"f"}}`,
		// A string that breaks after its opening quote (once stalled the member loop).
		`{"type":"response.create","model":"m","input":[{"type":"function_call_tpue","call_id":"c","ou:1}]}`,
		`{"type":"response.steer","input":type":"function_call_output","output":"x"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := DecodeClientEvent(context.Background(), data)
		if err != nil {
			if err.Status != 400 || err.Code == "" || err.Message == "" {
				t.Fatalf("bad error %+v", err)
			}
			// Every answer must encode as valid JSON.
			if b := AppendError(nil, err); !json.Valid(b) {
				t.Fatalf("invalid error envelope %s", b)
			}
			return
		}
		var items []Item
		switch ev.Type {
		case EventCreate:
			items = ev.Create.Input
		case EventAppend:
			items = ev.Input
		default:
			return
		}
		if items == nil {
			return
		}
		enc := appendItems(nil, items)
		if !json.Valid(enc) {
			t.Fatalf("items encode to invalid JSON: %s", enc)
		}
		frame := append([]byte(`{"type":"response.append","response_id":"r","input":`), enc...)
		frame = append(frame, '}')
		ev2, err := DecodeClientEvent(context.Background(), frame)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", frame, err)
		}
		if !reflect.DeepEqual(ev2.Input, items) {
			t.Fatalf("round trip differs:\n got %#v\nwant %#v", ev2.Input, items)
		}
		if ev.Type == EventCreate {
			r := Response{Model: ev.Create.Model, Tools: ev.Create.Tools, ToolChoice: ev.Create.ToolChoice, Metadata: ev.Create.Metadata, Output: items}
			if ev.Create.Text != nil {
				r.Text = *ev.Create.Text
			}
			if b := appendResponse(nil, &r, nil); !json.Valid(b) || bytes.IndexByte(b, '\n') >= 0 {
				t.Fatalf("response echo is not one line of valid JSON: %s", b)
			}
		}
	})
}

func BenchmarkDecodeAppend(b *testing.B) {
	frame := []byte(`{"type":"response.append","response_id":"resp_0123456789abcdef","input":[{"type":"function_call_output","call_id":"call_Zm9v1","output":"{\"temp_c\":18,\"sky\":\"cloudy\"}"}]}`)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeClientEvent(context.Background(), frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCreateLarge(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"type":"response.create","model":"sim","input":[`)
	for i := range 2000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"type":"function_call","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"ls -la /tmp\"}"},`)
		sb.WriteString(`{"type":"function_call_output","call_id":"call_1","output":"` + strings.Repeat("total 0 drwxr-xr-x 2 user user 4096 file.txt\\n", 4) + `"}`)
	}
	sb.WriteString(`]}`)
	frame := []byte(sb.String())
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeClientEvent(context.Background(), frame); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeRejectsInvalidUTF8(t *testing.T) {
	_, err := DecodeClientEvent(context.Background(), []byte("{\"type\":\"response.create\",\"model\":\"m\",\"input\":\"a\xffb\"}"))
	if err == nil || err.Code != CodeInvalidJSON || err.Param != "" {
		t.Fatalf("invalid UTF-8 accepted or wrong error: %v", err)
	}
}

func TestDecodeRejectsDuplicateTopLevelKeys(t *testing.T) {
	for _, frame := range []string{
		`{"type":"response.create","type":"response.cancel","response_id":"r","model":"m"}`,
		`{"type":"response.create","model":"sim","model":"other"}`,
		`{"type":"response.append","response_id":"a","response_id":"b","input":[]}`,
		`{"type":"response.cancel","response_id":"a","response_id":"b"}`,
	} {
		if _, err := DecodeClientEvent(context.Background(), []byte(frame)); err == nil || err.Code != CodeInvalidValue {
			t.Errorf("%s: got %v, want invalid_value", frame, err)
		}
	}
	if _, err := DecodeCreateParams(context.Background(), []byte(`{"model":"m","input":"x","input":"y"}`)); err == nil || err.Param != "input" {
		t.Errorf("POST body with two inputs: %v", err)
	}
}

// TestDecodeDuplicateNestedMembers pins the rule for repeated members below the top level:
// every occurrence is checked, the last one wins, and the first "type" selects the shape.
func TestDecodeDuplicateNestedMembers(t *testing.T) {
	ev, err := DecodeClientEvent(context.Background(), []byte(`{"type":"response.create","model":"m","metadata":{"k":"1","k":"2"},`+
		`"reasoning":{"effort":"low","effort":"high"},`+
		`"input":[{"type":"message","type":"function_call","role":"user","content":"a","content":"b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cp := ev.Create
	if it := cp.Input[0]; it.Type != ItemMessage || len(it.Content) != 1 || it.Content[0].Text != "b" {
		t.Errorf("item: got %+v, want a message with the last content \"b\"", it)
	}
	if cp.Metadata["k"] != "2" || len(cp.Metadata) != 1 {
		t.Errorf("metadata: got %v, want the last value", cp.Metadata)
	}
	if cp.Reasoning == nil || cp.Reasoning.Effort == nil || *cp.Reasoning.Effort != "high" {
		t.Errorf("reasoning: got %+v, want the last effort", cp.Reasoning)
	}
	_, err = DecodeClientEvent(context.Background(), []byte(`{"type":"response.create","model":"m","input":[{"role":"user","content":1,"content":"b"}]}`))
	if err == nil || err.Code != CodeInvalidType || err.Param != "input[0].content" {
		t.Errorf("an overridden bad occurrence: got %v, want invalid_type at input[0].content", err)
	}
}

// typicalCreate is a response.create as a coding agent sends it mid-session: four tools and 20
// input items (messages with content parts, reasoning, function calls and their outputs).
func typicalCreate() []byte { return createItems(4) }

// createItems is typicalCreate with its five-item turn repeated turns times.
func createItems(turns int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"type":"response.create","model":"gpt-5.6-codex","instructions":"You are Codex.",` +
		`"tools":[{"type":"function","name":"exec_command","description":"Run a command","strict":false,` +
		`"parameters":{"type":"object","properties":{"cmd":{"type":"string"},"workdir":{"type":"string"}},"required":["cmd"]}},` +
		`{"type":"function","name":"read_file","description":"Read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}},` +
		`{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},` +
		`{"type":"web_search"}],"tool_choice":"auto","parallel_tool_calls":true,` +
		`"reasoning":{"effort":"medium","summary":"auto"},"store":false,"stream":true,` +
		`"include":["reasoning.encrypted_content"],"prompt_cache_key":"sess-1","input":[`)
	for i := range turns {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the failing test in ./pkg/foo and run it again"}]},` +
			`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAABo0123456789abcdefghijklmnopqrstuvwxyz"},` +
			`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"go test ./pkg/foo\"}"},` +
			`{"type":"function_call_output","call_id":"call_1","output":"--- FAIL: TestFoo (0.00s)\n    foo_test.go:12: got 1, want 2\nFAIL\n"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"The test expects 2; the off-by-one is in foo.go.","annotations":[]}]}`)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// stdCreate is typicalCreate's shape for encoding/json: the same members, typed where the
// frame's values have one type (content parts as structs, unmodelled values raw). It reports
// no param paths and checks nothing beyond JSON types.
type stdCreate struct {
	Type              string          `json:"type"`
	Model             string          `json:"model"`
	Instructions      *string         `json:"instructions"`
	Input             []stdItem       `json:"input"`
	Tools             []stdTool       `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Reasoning         *struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
	Store          *bool    `json:"store"`
	Stream         bool     `json:"stream"`
	Include        []string `json:"include"`
	PromptCacheKey *string  `json:"prompt_cache_key"`
}

type stdItem struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	Role      string    `json:"role"`
	Content   []stdPart `json:"content"`
	CallID    string    `json:"call_id"`
	Name      string    `json:"name"`
	Arguments string    `json:"arguments"`
	Output    string    `json:"output"`
}

type stdPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type stdTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Format      json.RawMessage `json:"format"`
}

// BenchmarkDecodeCreateTypical compares DecodeClientEvent with encoding/json.Unmarshal into
// stdCreate on typicalCreate (the numbers are quoted in jsonread.go).
func BenchmarkDecodeCreateTypical(b *testing.B) {
	frame := typicalCreate()
	b.Run("DecodeClientEvent", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeClientEvent(context.Background(), frame); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			var v stdCreate
			if err := json.Unmarshal(frame, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestTypicalCreateDecodes(t *testing.T) {
	ev, err := DecodeClientEvent(context.Background(), typicalCreate())
	if err != nil || len(ev.Create.Input) != 20 || len(ev.Create.Tools) != 4 {
		t.Fatalf("typicalCreate: %v", err)
	}
	var v stdCreate
	if err := json.Unmarshal(typicalCreate(), &v); err != nil || len(v.Input) != 20 || len(v.Tools) != 4 {
		t.Fatalf("typicalCreate via encoding/json: %v", err)
	}
}

// BenchmarkDecodeCreate2000 decodes a response.create of 2,000 input items: typicalCreate's
// tools and its five-item turn (messages with parts, reasoning, a function call and its output)
// repeated 400 times.
func BenchmarkDecodeCreate2000(b *testing.B) {
	frame := createItems(400)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		ev, err := DecodeClientEvent(context.Background(), frame)
		if err != nil || len(ev.Create.Input) != 2000 {
			b.Fatal(err)
		}
	}
}

// TestDecodeSteerEchoesWholeInput checks that a steer whose input is bad still carries the
// whole input as sent, so that response.steer.failed echoes valid JSON.
func TestDecodeSteerEchoesWholeInput(t *testing.T) {
	sp, err := DecodeSteer(context.Background(), []byte(`{"type":"response.steer","previous_response_id":"resp_1","input":[{"role":"user", "content":3}]}`))
	if err == nil || err.Code != CodeInvalidInput || err.Param != "input[0].content" {
		t.Fatalf("got %v, want invalid_input at input[0].content", err)
	}
	if string(sp.RawInput) != `[{"role":"user","content":3}]` || sp.PreviousResponseID != "resp_1" {
		t.Errorf("got %+v", sp)
	}
	if echo := SteerEcho("", sp.PreviousResponseID, sp.RawInput); !json.Valid(echo) {
		t.Errorf("echo %s is not JSON", echo)
	}
	if sp, _ := DecodeSteer(context.Background(), []byte(`{"previous_response_id":"resp_1","input":"x"`)); sp.PreviousResponseID != "" {
		t.Errorf("a frame that is not JSON gave %+v", sp)
	}
}

// TestDecodeSteerUnknownMember checks that a steer member the frame does not have is refused
// with invalid_input naming it, and that type and event_id are taken.
func TestDecodeSteerUnknownMember(t *testing.T) {
	for _, tc := range []struct{ frame, param string }{
		{`{"type":"response.steer","previous_response_id":"resp_1","input":"x","stream_id":"L"}`, "stream_id"},
		{`{"type":"response.steer","previous_response_id":"resp_1","inptu":"x"}`, "inptu"},
		{`{"type":"response.steer","event_id":null,"previous_response_id":"resp_1","input":"x"}`, ""},
	} {
		_, err := DecodeSteer(context.Background(), []byte(tc.frame))
		switch {
		case tc.param == "" && err != nil:
			t.Errorf("%s: %v", tc.frame, err)
		case tc.param != "" && (err == nil || err.Code != CodeInvalidInput || err.Param != tc.param || !strings.Contains(err.Message, "Unknown parameter")):
			t.Errorf("%s: got %v, want invalid_input at %s", tc.frame, err, tc.param)
		}
	}
}

// hotTurn is the create of a hot WebSocket turn: previous_response_id and one
// function_call_output of about 4 KB.
func hotTurn() []byte {
	return []byte(`{"type":"response.create","model":"gpt-5.6-codex","previous_response_id":"resp_0123456789abcdef0123456789abcdef",` +
		`"store":false,"stream":true,"input":[{"type":"function_call_output","call_id":"call_Zm9vYmFy","output":"` +
		strings.Repeat(`total 0 drwxr-xr-x 2 user user 4096 file.txt\n`, 90) + `"}]}`)
}

// BenchmarkDecodeCreateHotTurn decodes hotTurn, the create of a hot WebSocket turn.
func BenchmarkDecodeCreateHotTurn(b *testing.B) {
	frame := hotTurn()
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeClientEvent(context.Background(), frame); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFormatMemberTypes: a text.format, or its type or name, of the wrong JSON type is named
// by its param in the wording of every other invalid_type, not by the JSON library's error.
func TestFormatMemberTypes(t *testing.T) {
	cases := []struct{ format, param, msg string }{
		{`5`, "text.format", "Invalid type for 'text.format': expected an object, but got a number."},
		{`"text"`, "text.format", "Invalid type for 'text.format': expected an object, but got a string."},
		{`[]`, "text.format", "Invalid type for 'text.format': expected an object, but got an array."},
		{`{"type":5}`, "text.format.type", "Invalid type for 'text.format.type': expected a string, but got a number."},
		{`{"type":{}}`, "text.format.type", "Invalid type for 'text.format.type': expected a string, but got an object."},
		{`{"type":"json_schema","name":true,"schema":{}}`, "text.format.name", "Invalid type for 'text.format.name': expected a string, but got a boolean."},
	}
	for _, c := range cases {
		body := `{"model":"m","input":"hi","text":{"format":` + c.format + `}}`
		_, err := DecodeCreateParams(context.Background(), []byte(body))
		if err == nil || err.Code != CodeInvalidType || err.Param != c.param || err.Message != c.msg {
			t.Errorf("%s: got %+v, want invalid_type %s %q", c.format, err, c.param, c.msg)
		}
	}
	for _, ok := range []string{`null`, `{"type":null}`, `{"type":"text"}`, `{"type":"json_schema","name":"n","schema":{}}`} {
		body := `{"model":"m","input":"hi","text":{"format":` + ok + `}}`
		if _, err := DecodeCreateParams(context.Background(), []byte(body)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
