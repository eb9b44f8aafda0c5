package chatwire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// TestSettingsRoundTrip: settings sent by the chat backend (SetSettings) come back equal when
// a Tether decodes them (SettingsFromRequest), for every field both sides carry.
func TestSettingsRoundTrip(t *testing.T) {
	temp, topP, presence, frequency := 0.5, 0.9, -0.5, 1.25
	desc := "weather"
	for _, s := range []sampler.Settings{
		{Model: "m", ToolChoice: protocol.ToolChoice{Name: "get_weather"}, ParallelToolCalls: false,
			Tools:           []protocol.Tool{{Type: "function", Name: "get_weather", Description: &desc, Parameters: json.RawMessage(`{"type":"object"}`)}},
			MaxOutputTokens: 7, Temperature: &temp, TopP: &topP, ReasoningEffort: "low",
			PresencePenalty: &presence, FrequencyPenalty: &frequency, Verbosity: "high",
			TextFormat: json.RawMessage(`{"name":"w","schema":{"type":"object"},"strict":true,"type":"json_schema"}`),
			Metadata:   map[string]string{"sim.calls": "2"}, Instructions: "be brief"},
		{Model: "m", ToolChoice: protocol.ToolChoice{Mode: "none"}, ParallelToolCalls: true,
			Tools:      []protocol.Tool{{Type: "function", Name: "f"}},
			TextFormat: json.RawMessage(`{"type":"json_object"}`)},
		{Model: "m", ParallelToolCalls: true},
	} {
		var req Request
		req.SetSettings(&s, false)
		b, err := json.Marshal(&req)
		if err != nil {
			t.Fatal(err)
		}
		var back Request
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		var instr *string
		if s.Instructions != "" {
			instr = &s.Instructions
		}
		got, perr := SettingsFromRequest(&back, instr)
		if perr != nil {
			t.Fatalf("%s: %v", b, perr)
		}
		if string(got.TextFormat) != string(s.TextFormat) {
			t.Errorf("text format %s, want %s", got.TextFormat, s.TextFormat)
		}
		got.TextFormat, s.TextFormat = nil, nil
		if !reflect.DeepEqual(got, s) {
			t.Errorf("round trip of %s:\n got %+v\nwant %+v", b, got, s)
		}
	}
}

// TestItemsRoundTrip: items → messages (the backend) → items (the server) keep their content,
// call ids and order; reasoning is dropped, developer becomes system.
func TestItemsRoundTrip(t *testing.T) {
	items := []protocol.Item{
		message("user", protocol.PartInputText, "hi"),
		{Type: protocol.ItemReasoning, Raw: json.RawMessage(`{"type":"reasoning","summary":[]}`)},
		message("assistant", protocol.PartOutputText, "let me look"),
		{Type: protocol.ItemFunctionCall, CallID: "c1", Name: "f", Arguments: `{"a":1}`},
		{Type: protocol.ItemFunctionCall, CallID: "c2", Name: "g", Arguments: `{}`},
		{Type: protocol.ItemFunctionCallOutput, CallID: "c1", Output: "one"},
		{Type: protocol.ItemFunctionCallOutput, CallID: "c2", OutputParts: []protocol.ContentPart{{Type: "input_text", Text: "two"}}},
		message("developer", protocol.PartInputText, "stay on topic"),
	}
	msgs, err := MessagesFromItems(nil, items)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 || len(msgs[1].ToolCalls) != 2 || msgs[4].Role != "system" {
		t.Fatalf("messages %+v", msgs)
	}
	_, back, perr := ItemsFromMessages(append([]Message{{Role: "user", Content: TextContent("x")}}, msgs...))
	if perr != nil {
		t.Fatal(perr)
	}
	back = back[1:]
	want := []string{"message user hi", "message assistant let me look", "function_call c1 f {\"a\":1}",
		"function_call c2 g {}", "function_call_output c1 one", "function_call_output c2 two", "message system stay on topic"}
	if len(back) != len(want) {
		t.Fatalf("%d items back: %+v", len(back), back)
	}
	for i, it := range back {
		var got string
		switch it.Type {
		case protocol.ItemMessage:
			got = it.Type + " " + it.Role + " " + it.Text()
		case protocol.ItemFunctionCall:
			got = it.Type + " " + it.CallID + " " + it.Name + " " + it.Arguments
		default:
			got = it.Type + " " + it.CallID + " " + it.Output
		}
		if got != want[i] {
			t.Errorf("item %d: %q, want %q", i, got, want[i])
		}
	}
	if e, _ := protocol.AsError(CheckItems([]protocol.Item{{Type: "custom_tool_call"}})); e == nil || e.Param != "input[0].type" {
		t.Errorf("CheckItems of an unknown type: %v", e)
	}
}

// TestImagesRoundTrip: input_image parts (a URL with detail, a data URL without) become chat
// image_url parts with exact bytes, and come back as the same input_image parts (detail "auto"
// when it was absent); text-only messages keep a string content.
func TestImagesRoundTrip(t *testing.T) {
	img := func(raw string) protocol.ContentPart {
		return protocol.ContentPart{Type: PartInputImage, Raw: json.RawMessage(raw)}
	}
	items := []protocol.Item{{Type: protocol.ItemMessage, Role: protocol.RoleUser, Status: protocol.StatusCompleted, Content: []protocol.ContentPart{
		{Type: protocol.PartInputText, Text: "compare"},
		img(`{"type":"input_image","image_url":"https://example.com/a.png","detail":"high"}`),
		img(`{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/4AAQ"}`),
	}}, message("assistant", protocol.PartOutputText, "done")}
	msgs, err := MessagesFromItems(nil, items)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"text","text":"compare"},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"high"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ"}}]`
	if got := string(msgs[0].Content); got != want {
		t.Fatalf("content\n got %s\nwant %s", got, want)
	}
	if got := string(msgs[1].Content); got != `"done"` {
		t.Fatalf("text-only content %s", got)
	}
	_, back, perr := ItemsFromMessages(msgs)
	if perr != nil {
		t.Fatal(perr)
	}
	items[0].Content[2] = img(`{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/4AAQ","detail":"auto"}`)
	if !reflect.DeepEqual(back, items) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, items)
	}
	for _, bad := range []protocol.Item{
		{Type: protocol.ItemMessage, Role: protocol.RoleUser, Content: []protocol.ContentPart{img(`{"type":"input_image","file_id":"file-1"}`)}},
		{Type: protocol.ItemMessage, Role: protocol.RoleDeveloper, Content: []protocol.ContentPart{img(`{"type":"input_image","image_url":"https://x/y.png"}`)}},
		{Type: protocol.ItemMessage, Role: protocol.RoleUser, Content: []protocol.ContentPart{{Type: "input_file", Raw: json.RawMessage(`{"type":"input_file","file_id":"f"}`)}}},
	} {
		if _, err := MessagesFromItems(nil, []protocol.Item{bad}); err == nil {
			t.Errorf("MessagesFromItems(%+v): no error", bad)
		}
		if e, _ := protocol.AsError(CheckItems([]protocol.Item{bad})); e == nil || e.Param != "input[0].content" {
			t.Errorf("CheckItems(%+v): %v", bad, e)
		}
	}
}

// TestToolOutputImages: the images of a run of function_call_outputs follow its tool messages
// in one user message (chat templates want roles to alternate), each output's images led by a
// text part naming the call; the tool
// message keeps the text; a file_id image or a file part is refused, by CheckItems with its
// param.
func TestToolOutputImages(t *testing.T) {
	img := func(url string) protocol.ContentPart {
		return protocol.ContentPart{Type: PartInputImage, Raw: json.RawMessage(`{"type":"input_image","image_url":"` + url + `","detail":"low"}`)}
	}
	items := []protocol.Item{
		{Type: protocol.ItemFunctionCall, CallID: "c1", Name: "shot", Arguments: `{}`},
		{Type: protocol.ItemFunctionCall, CallID: "c2", Name: "shot", Arguments: `{}`},
		{Type: protocol.ItemFunctionCallOutput, CallID: "c1", OutputParts: []protocol.ContentPart{{Type: "input_text", Text: "screen one"}, img("data:image/png;base64,AAAA")}},
		{Type: protocol.ItemFunctionCallOutput, CallID: "c2", OutputParts: []protocol.ContentPart{img("https://example.com/2.png")}},
		message("user", protocol.PartInputText, "go on"),
	}
	msgs, err := MessagesFromItems(nil, items)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Role+" "+string(m.Content))
	}
	want := []string{
		`assistant null`,
		`tool "screen one"`,
		`tool ""`,
		`user [{"type":"text","text":"Images from the output of call c1:"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},` +
			`{"type":"text","text":"Images from the output of call c2:"},{"type":"image_url","image_url":{"url":"https://example.com/2.png","detail":"low"}}]`,
		`user "go on"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, bad := range []protocol.ContentPart{
		{Type: PartInputImage, Raw: json.RawMessage(`{"type":"input_image","file_id":"file_1"}`)},
		{Type: "input_file", Raw: json.RawMessage(`{"type":"input_file","file_id":"file_1"}`)},
	} {
		in := []protocol.Item{message("user", protocol.PartInputText, "x"),
			{Type: protocol.ItemFunctionCallOutput, CallID: "c9", OutputParts: []protocol.ContentPart{bad}}}
		if _, err := MessagesFromItems(nil, in); err == nil {
			t.Errorf("%s in a tool output: converted, want an error", bad.Raw)
		}
		err := CheckItems(in)
		var pe *protocol.Error
		if !errors.As(err, &pe) || pe.Param != "input[1].output" {
			t.Errorf("CheckItems of %s in a tool output: %v, want a 400 with param input[1].output", bad.Raw, err)
		}
	}
}

// TestArgumentsNotJSON: a function_call whose arguments are not JSON (a model without strict
// mode wrote them) is sent with them as a JSON string holding the text; JSON arguments, of
// any kind, go unchanged.
func TestArgumentsNotJSON(t *testing.T) {
	for args, want := range map[string]string{
		`{"location": "Par`: `"{\"location\": \"Par"`,
		`not json`:          `"not json"`,
		``:                  `""`,
		`{"a":1}`:           `{"a":1}`,
		` {"a": [1, 2]} `:   ` {"a": [1, 2]} `,
		`[1,2]`:             `[1,2]`,
		`"s"`:               `"s"`,
	} {
		msgs, err := MessagesFromItems(nil, []protocol.Item{{Type: protocol.ItemFunctionCall, CallID: "c1", Name: "f", Arguments: args}})
		if err != nil {
			t.Fatal(err)
		}
		if got := msgs[0].ToolCalls[0].Function.Arguments; got != want {
			t.Errorf("arguments %q sent as %q, want %q", args, got, want)
		}
	}
}
