package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var (
	fcItem  = Item{ID: "fc_1", Type: ItemFunctionCall, Status: StatusCompleted, CallID: "call_a", Name: "get_weather", Arguments: `{"location":"Paris"}`}
	msgItem = Item{ID: "msg_1", Type: ItemMessage, Status: StatusCompleted, Role: RoleAssistant,
		Content: []ContentPart{{Type: PartOutputText, Text: "Hello!"}}}
	usage = &Usage{InputTokens: 10, OutputTokens: 3, TotalTokens: 13, InputTokensDetails: InputTokensDetails{CachedTokens: 4}}
)

// emptyResponse is the bytes of a zero-ish Response (as in response.created).
const createdResponse = `{"id":"resp_01a","object":"response","created_at":1764400000,"completed_at":null,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5.6","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"auto","store":false,"temperature":1,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1,"presence_penalty":0,"frequency_penalty":0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}`

func createdResp() *Response {
	return &Response{ID: "resp_01a", Object: "response", CreatedAt: 1764400000, Status: ResponseInProgress, Model: "gpt-5.6",
		ParallelToolCalls: true, Temperature: 1, TopP: 1}
}

// TestAppendEventGolden checks the exact bytes of every server event type.
func TestAppendEventGolden(t *testing.T) {
	completedAt := int64(1764400001)
	completed := createdResp()
	completed.Status, completed.CompletedAt, completed.Output, completed.Usage = ResponseCompleted, &completedAt, []Item{msgItem}, usage
	completed.ServiceTier = "default"
	completed.Metadata = map[string]string{"z": "1", "a": "<&>"}
	completed.Tools = []Tool{
		{Type: ToolFunction, Name: "get_weather", Parameters: json.RawMessage("{\n  \"type\": \"object\"\n}"), Strict: ptr(true)},
		{Type: "custom", Raw: json.RawMessage(`{"type":"custom","name":"apply_patch"}`)},
	}
	completed.ToolChoice = ToolChoice{Name: "get_weather"}
	failed := createdResp()
	failed.Status, failed.Error = ResponseFailed, &ResponseError{Code: CodeServerError, Message: "The model failed to generate a response."}
	incomplete := createdResp()
	incomplete.Status, incomplete.IncompleteDetails = ResponseIncomplete, &IncompleteDetails{Reason: ReasonCancelled}
	incomplete.Instructions, incomplete.MaxOutputTokens, incomplete.Temperature = ptr("Be brief."), ptr(16), 0.2
	incomplete.Reasoning = Reasoning{Effort: ptr("low")}
	incomplete.Text = TextConfig{Format: json.RawMessage(`{"type":"json_object"}`), Verbosity: "low"}

	partialMsg := Item{ID: "msg_1", Type: ItemMessage, Status: StatusInProgress, Role: RoleAssistant}
	partialFC := Item{ID: "fc_1", Type: ItemFunctionCall, Status: StatusInProgress, CallID: "call_a", Name: "get_weather"}

	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{Event{Type: EventCreated, Response: createdResp()},
			`{"type":"response.created","sequence_number":0,"response":` + createdResponse + `}`},
		{Event{Type: EventInProgress, SequenceNumber: 1, Response: createdResp()},
			`{"type":"response.in_progress","sequence_number":1,"response":` + createdResponse + `}`},
		{Event{Type: EventOutputItemAdded, SequenceNumber: 2, Item: &partialMsg},
			`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`},
		{Event{Type: EventOutputItemAdded, SequenceNumber: 2, OutputIndex: 1, Item: &partialFC},
			`{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"get_weather"}}`},
		{Event{Type: EventContentPartAdded, SequenceNumber: 3, ItemID: "msg_1", Part: &ContentPart{Type: PartOutputText}},
			`{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`},
		{Event{Type: EventContentPartAdded, SequenceNumber: 3, ItemID: "msg_1"}, // nil part
			`{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`},
		{Event{Type: EventOutputTextDelta, SequenceNumber: 4, ItemID: "msg_1", Delta: "Hel\"lo\n<b>&é\u2028\x01"},
			`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hel\"lo\n<b>&é\u2028\u0001","logprobs":[]}`},
		{Event{Type: EventOutputTextDone, SequenceNumber: 6, ItemID: "msg_1", OutputIndex: 2, ContentIndex: 1, Text: "Hello!"},
			`{"type":"response.output_text.done","sequence_number":6,"item_id":"msg_1","output_index":2,"content_index":1,"text":"Hello!","logprobs":[]}`},
		{Event{Type: EventContentPartDone, SequenceNumber: 7, ItemID: "msg_1", Part: &ContentPart{Type: PartOutputText, Text: "Hello!"}},
			`{"type":"response.content_part.done","sequence_number":7,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello!"}}`},
		{Event{Type: EventOutputItemDone, SequenceNumber: 8, Item: &msgItem},
			`{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello!"}],"role":"assistant"}}`},
		{Event{Type: EventArgumentsDelta, SequenceNumber: 3, ItemID: "fc_1", Delta: `{"location":`},
			`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"{\"location\":"}`},
		{Event{Type: EventArgumentsDone, SequenceNumber: 5, ItemID: "fc_1", Name: "get_weather", Arguments: `{"location":"Paris"}`},
			`{"type":"response.function_call_arguments.done","sequence_number":5,"item_id":"fc_1","output_index":0,"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}`},
		{Event{Type: EventCompleted, SequenceNumber: 9, Response: completed},
			`{"type":"response.completed","sequence_number":9,"response":{"id":"resp_01a","object":"response","created_at":1764400000,"completed_at":1764400001,"status":"completed","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5.6","output":[{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello!"}],"role":"assistant"}],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"default","store":false,"temperature":1,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":{"type":"function","name":"get_weather"},"tools":[{"type":"function","name":"get_weather","description":null,"parameters":{"type":"object"},"strict":true},{"type":"custom","name":"apply_patch"}],"top_logprobs":0,"top_p":1,"presence_penalty":0,"frequency_penalty":0,"truncation":"disabled","usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4,"cache_write_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13},"user":null,"metadata":{"a":"<&>","z":"1"}}}`},
		{Event{Type: EventIncomplete, SequenceNumber: 5, Response: incomplete},
			`{"type":"response.incomplete","sequence_number":5,"response":{"id":"resp_01a","object":"response","created_at":1764400000,"completed_at":null,"status":"incomplete","background":false,"error":null,"incomplete_details":{"reason":"cancelled"},"instructions":"Be brief.","max_output_tokens":16,"max_tool_calls":null,"model":"gpt-5.6","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":"low","summary":null},"safety_identifier":null,"service_tier":"auto","store":false,"temperature":0.2,"text":{"format":{"type":"json_object"},"verbosity":"low"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1,"presence_penalty":0,"frequency_penalty":0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}`},
		{Event{Type: EventFailed, SequenceNumber: 3, Response: failed},
			`{"type":"response.failed","sequence_number":3,"response":{"id":"resp_01a","object":"response","created_at":1764400000,"completed_at":null,"status":"failed","background":false,"error":{"code":"server_error","message":"The model failed to generate a response."},"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5.6","output":[],"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":null,"reasoning":{"effort":null,"summary":null},"safety_identifier":null,"service_tier":"auto","store":false,"temperature":1,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],"top_logprobs":0,"top_p":1,"presence_penalty":0,"frequency_penalty":0,"truncation":"disabled","usage":null,"user":null,"metadata":{}}}`},
		{Event{Type: EventDone, SequenceNumber: 10, ResponseID: "resp_A", PendingCallIDs: []string{"call_a", "call_b"}, Output: []Item{fcItem}, Usage: usage},
			`{"type":"response.done","sequence_number":10,"response_id":"resp_A","pending_call_ids":["call_a","call_b"],"output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"location\":\"Paris\"}","call_id":"call_a","name":"get_weather"}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4,"cache_write_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13}}`},
		{Event{Type: EventDone, ResponseID: "resp_A"},
			`{"type":"response.done","sequence_number":0,"response_id":"resp_A","pending_call_ids":[],"output":[],"usage":null}`},
		{Event{Type: EventSteerFailed, SequenceNumber: 12, Steer: json.RawMessage(`{"previous_response_id": "resp_01c", "input": "Prioritize the rollout."}`),
			Error: &Error{Type: TypeInvalidRequest, Code: CodeSteeringNotSupported, Message: "Steering is not supported for this response."}},
			`{"type":"response.steer.failed","sequence_number":12,"steer":{"previous_response_id":"resp_01c","input":"Prioritize the rollout."},"error":{"type":"invalid_request_error","code":"steering_not_supported","message":"Steering is not supported for this response."}}`},
		{Event{Type: EventError, SequenceNumber: 99, Error: &Error{Status: 400, Type: TypeInvalidRequest, Code: CodeMissingToolOutput, Message: "No tool output found for function call call_b.", Param: "input"}},
			`{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"missing_tool_output","message":"No tool output found for function call call_b.","param":"input"}}`},
	} {
		t.Run(string(tc.ev.Type), func(t *testing.T) {
			got := AppendEvent([]byte("prefix"), &tc.ev)
			if !bytes.HasPrefix(got, []byte("prefix")) {
				t.Fatalf("dst prefix lost: %s", got)
			}
			got = got[len("prefix"):]
			if string(got) != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
			// The other way: the golden is one valid JSON line and every event but error
			// carries sequence_number.
			var m map[string]any
			if err := json.Unmarshal([]byte(tc.want), &m); err != nil {
				t.Fatal(err)
			}
			if _, ok := m["sequence_number"]; ok == (tc.ev.Type == EventError) {
				t.Errorf("sequence_number presence wrong for %s", tc.ev.Type)
			}
			if m["type"] != string(tc.ev.Type) || bytes.IndexByte(got, '\n') >= 0 {
				t.Errorf("type %v / newline in %s", m["type"], got)
			}
			// Settings encoded from another Response with the same settings give the same bytes.
			if tc.ev.Response != nil {
				other := *tc.ev.Response
				other.ID, other.Status, other.Output, other.Usage, other.CompletedAt = "resp_other", ResponseInProgress, nil, nil, nil
				ev := tc.ev
				ev.Settings = EncodeSettings(&other)
				if got := AppendEvent(nil, &ev); string(got) != tc.want {
					t.Errorf("with Settings\n got %s\nwant %s", got, tc.want)
				}
			}
			// Items in the event decode back to the same item.
			if tc.ev.Item != nil {
				var w struct{ Item Item }
				if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
					t.Fatal(err)
				}
				want := *tc.ev.Item
				if want.Content == nil && want.Type == ItemMessage {
					want.Content = []ContentPart{}
				}
				if !reflect.DeepEqual(w.Item, want) {
					t.Errorf("item round trip: got %#v want %#v", w.Item, want)
				}
			}
		})
	}
}

// TestAppendSettingsGolden checks the exact bytes of settings keys (a parked rollout's key,
// written by another server, is compared with them byte for byte) and that EncodeSettings
// builds the same key.
func TestAppendSettingsGolden(t *testing.T) {
	tools := createdResp()
	tools.Metadata = map[string]string{"z": "1", "a": "<&>"}
	tools.Tools = []Tool{
		{Type: ToolFunction, Name: "get_weather", Parameters: json.RawMessage("{\n  \"type\": \"object\"\n}"), Strict: ptr(true)},
		{Type: "custom", Raw: json.RawMessage(`{"type":"custom","name":"apply_patch"}`)},
	}
	tools.ToolChoice = ToolChoice{Name: "get_weather"}
	tuned := createdResp()
	tuned.Instructions, tuned.MaxOutputTokens, tuned.MaxToolCalls, tuned.Temperature = ptr("Be brief."), ptr(16), ptr(3), 0.2
	tuned.Reasoning = Reasoning{Effort: ptr("low"), Summary: ptr("auto")}
	tuned.Text = TextConfig{Format: json.RawMessage(`{"type": "json_object"}`), Verbosity: "low"}
	tuned.TopP, tuned.PresencePenalty, tuned.FrequencyPenalty, tuned.Truncation = 0.5, 1e-7, -1, "auto"
	for _, tc := range []struct {
		r    *Response
		want string
	}{
		{createdResp(), `{"model":"gpt-5.6","instructions":null,"tools":[],"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":null,"summary":null},"text":{"format":{"type":"text"},"verbosity":"medium"},"temperature":1,"top_p":1,"presence_penalty":0,"frequency_penalty":0,"max_output_tokens":null,"max_tool_calls":null,"truncation":"disabled","metadata":{}}`},
		{tools, `{"model":"gpt-5.6","instructions":null,"tools":[{"type":"function","name":"get_weather","description":null,"parameters":{"type":"object"},"strict":true},{"type":"custom","name":"apply_patch"}],"tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":true,"reasoning":{"effort":null,"summary":null},"text":{"format":{"type":"text"},"verbosity":"medium"},"temperature":1,"top_p":1,"presence_penalty":0,"frequency_penalty":0,"max_output_tokens":null,"max_tool_calls":null,"truncation":"disabled","metadata":{"a":"<&>","z":"1"}}`},
		{tuned, `{"model":"gpt-5.6","instructions":"Be brief.","tools":[],"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":"low","summary":"auto"},"text":{"format":{"type":"json_object"},"verbosity":"low"},"temperature":0.2,"top_p":0.5,"presence_penalty":1e-7,"frequency_penalty":-1,"max_output_tokens":16,"max_tool_calls":3,"truncation":"auto","metadata":{}}`},
	} {
		if got := AppendSettings([]byte("prefix"), tc.r); string(got) != "prefix"+tc.want {
			t.Errorf("AppendSettings\n got %s\nwant prefix%s", got, tc.want)
		}
		if got := EncodeSettings(tc.r).Key(); string(got) != tc.want {
			t.Errorf("EncodeSettings\n got %s\nwant %s", got, tc.want)
		}
		// The Response encodes the same with its members copied from the key.
		plain := appendResponse(nil, tc.r, nil)
		if got := appendResponse(nil, tc.r, EncodeSettings(tc.r)); !bytes.Equal(got, plain) {
			t.Errorf("appendResponse with Settings\n got %s\nwant %s", got, plain)
		}
	}
}

// TestResponseKeys checks that a zero Response encodes every ResponseResource key
// with non-null arrays and metadata, through both AppendEvent and encoding/json.
func TestResponseKeys(t *testing.T) {
	want := []string{"background", "completed_at", "created_at", "error", "frequency_penalty", "id", "incomplete_details",
		"instructions", "max_output_tokens", "max_tool_calls", "metadata", "model", "object", "output", "parallel_tool_calls",
		"presence_penalty", "previous_response_id", "prompt_cache_key", "reasoning", "safety_identifier", "service_tier",
		"status", "store", "temperature", "text", "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "usage", "user"}
	b, err := json.Marshal(Response{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, appendResponse(nil, &Response{}, nil)) {
		t.Errorf("json.Marshal and appendResponse differ:\n%s\n%s", b, appendResponse(nil, &Response{}, nil))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v\nwant %v", keys, want)
	}
	for k, v := range map[string]string{"output": "[]", "tools": "[]", "metadata": "{}", "object": `"response"`, "tool_choice": `"auto"`} {
		if string(m[k]) != v {
			t.Errorf("%s = %s, want %s", k, m[k], v)
		}
	}
}

func TestAppendErrorGolden(t *testing.T) {
	for _, tc := range []struct {
		err       Error
		ws, http  string
		httpState int
	}{
		{Error{Status: 400, Type: TypeInvalidRequest, Code: CodePreviousNotFound, Message: "Previous response with id 'resp_abc' not found.", Param: "previous_response_id"},
			`{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"previous_response_not_found","message":"Previous response with id 'resp_abc' not found.","param":"previous_response_id"}}`,
			`{"error":{"message":"Previous response with id 'resp_abc' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`, 400},
		{Error{Status: 400, Type: TypeInvalidRequest, Code: CodeInvalidJSON, Message: "The frame is not valid JSON: unexpected end of JSON input."},
			`{"type":"error","status":400,"error":{"type":"invalid_request_error","code":"invalid_json","message":"The frame is not valid JSON: unexpected end of JSON input.","param":null}}`,
			`{"error":{"message":"The frame is not valid JSON: unexpected end of JSON input.","type":"invalid_request_error","param":null,"code":"invalid_json"}}`, 400},
		{Error{Code: CodeServerError, Message: "boom <x>"},
			`{"type":"error","status":500,"error":{"type":"server_error","code":"server_error","message":"boom <x>","param":null}}`,
			`{"error":{"message":"boom <x>","type":"server_error","param":null,"code":"server_error"}}`, 500},
		{Error{Status: 413, Code: CodeMessageTooLarge, Message: "Frame too large."},
			`{"type":"error","status":413,"error":{"type":"invalid_request_error","code":"websocket_message_too_large","message":"Frame too large.","param":null}}`,
			`{"error":{"message":"Frame too large.","type":"invalid_request_error","param":null,"code":"websocket_message_too_large"}}`, 413},
	} {
		if got := string(AppendError(nil, &tc.err)); got != tc.ws {
			t.Errorf("ws\n got %s\nwant %s", got, tc.ws)
		}
		if got := string(AppendHTTPError(nil, &tc.err)); got != tc.http {
			t.Errorf("http\n got %s\nwant %s", got, tc.http)
		}
		if got := tc.err.HTTPStatus(); got != tc.httpState {
			t.Errorf("HTTPStatus = %d, want %d", got, tc.httpState)
		}
		// The other way: the envelope decodes to the same fields.
		var env struct {
			Type   string
			Status int
			Error  struct {
				Type, Code, Message string
				Param               *string
			}
		}
		if err := json.Unmarshal([]byte(tc.ws), &env); err != nil {
			t.Fatal(err)
		}
		param := ""
		if env.Error.Param != nil {
			param = *env.Error.Param
		}
		if env.Type != "error" || env.Status != tc.httpState || env.Error.Code != tc.err.Code || env.Error.Message != tc.err.Message || param != tc.err.Param {
			t.Errorf("envelope decodes to %+v", env)
		}
	}
}

// TestAppendStringMatchesEncodingJSON compares the string escaper with encoding/json
// (SetEscapeHTML(false)).
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\ slash/", "\x00\x01\x1f\x7f\b\f\n\r\t", "<script>&amp;</script>",
		"é漢字🙂", "\u2028\u2029", "bad\xffutf8\xc3", "\xed\xa0\x80", strings.Repeat("x", 100)} {
		checkString(t, s)
	}
}

func checkString(t *testing.T, s string) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSuffix(buf.String(), "\n")
	if got := string(appendString(nil, s)); got != want {
		t.Errorf("appendString(%q) = %s, want %s", s, got, want)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\n\u2028\xff<>")
	f.Fuzz(func(t *testing.T, s string) {
		checkString(t, s)
		if b := appendString(nil, s); !utf8.Valid(b) {
			t.Fatalf("invalid UTF-8 out: %q", b)
		}
	})
}

func TestAppendTextDeltaAllocs(t *testing.T) {
	ev := &Event{Type: EventOutputTextDelta, SequenceNumber: 1234, ItemID: "msg_0123456789abcdef", OutputIndex: 2, Delta: " the quick brown fox\n"}
	buf := make([]byte, 0, 512)
	allocs := testing.AllocsPerRun(1000, func() {
		buf = AppendEvent(buf[:0], ev)
	})
	if allocs != 0 {
		t.Errorf("text delta: %v allocs per event, want 0", allocs)
	}
	ev = &Event{Type: EventArgumentsDelta, SequenceNumber: 3, ItemID: "fc_1", Delta: `{"cmd":`}
	if allocs := testing.AllocsPerRun(1000, func() { buf = AppendEvent(buf[:0], ev) }); allocs != 0 {
		t.Errorf("arguments delta: %v allocs per event, want 0", allocs)
	}
}

func BenchmarkAppendTextDelta(b *testing.B) {
	ev := &Event{Type: EventOutputTextDelta, SequenceNumber: 1234, ItemID: "msg_0123456789abcdef", OutputIndex: 2, Delta: " the quick brown fox"}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendEvent(buf[:0], ev)
	}
}

func BenchmarkAppendCompleted(b *testing.B) {
	r := createdResp()
	r.Output = []Item{fcItem, msgItem}
	r.Usage = usage
	ev := &Event{Type: EventCompleted, SequenceNumber: 9, Response: r}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendEvent(buf[:0], ev)
	}
}

// BenchmarkTurnResponses is the Response encoding of one public turn of tether bench's
// workload (one function tool, metadata): its settings key, response.created,
// response.in_progress and response.completed. "plain" encodes the settings four times,
// "settings" once (EncodeSettings, then Event.Settings).
func BenchmarkTurnResponses(b *testing.B) {
	r := createdResp()
	r.Metadata = map[string]string{"sim.calls": "200", "sim.speed": "instant"}
	r.Tools = []Tool{{Type: ToolFunction, Name: "exec_command", Description: ptr("Run a shell command and return its output."),
		Parameters: json.RawMessage(`{"type":"object","properties":{"cmd":{"type":"string","description":"The command line."}},"required":["cmd"]}`)}}
	r.PreviousResponseID = ptr("resp_0123456789abcdef0123456789abcdef")
	done := *r
	completedAt := int64(1764400001)
	done.Status, done.CompletedAt, done.Output, done.Usage = ResponseCompleted, &completedAt, []Item{fcItem}, usage
	for _, name := range []string{"plain", "settings"} {
		b.Run(name, func(b *testing.B) {
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				var s *Settings
				if name == "settings" {
					s = EncodeSettings(r)
				} else {
					_ = AppendSettings(nil, r) // the settings key, a copy the segment keeps
				}
				for _, ev := range [...]Event{{Type: EventCreated, Response: r}, {Type: EventInProgress, Response: r}, {Type: EventCompleted, Response: &done}} {
					ev.Settings = s
					buf = AppendEvent(buf[:0], &ev)
				}
			}
		})
	}
}

// TestAppendStringLongRuns: a string with runs of plain characters longer than appendRun, and
// escapes next to the run boundaries, encodes as encoding/json encodes it.
func TestAppendStringLongRuns(t *testing.T) {
	s := strings.Repeat("a", appendRun-1) + "\"" + strings.Repeat("b", 2*appendRun+1) + "\n" + strings.Repeat("é", appendRun)
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	if got := appendString(nil, s); !bytes.Equal(got, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
		t.Fatalf("encoded %d bytes, encoding/json %d", len(got), want.Len()-1)
	}
}

// BenchmarkAppendStringProse encodes 4 KiB of plain ASCII prose with a few escapes, the shape
// of instructions and tool outputs echoed in events.
func BenchmarkAppendStringProse(b *testing.B) {
	s := strings.Repeat("The quick brown fox jumps over the lazy dog; it said \"ok\".\n", 70)
	buf := make([]byte, 0, 2*len(s))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendString(buf[:0], s)
	}
}
