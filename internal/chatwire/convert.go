package chatwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// badRequest returns a 400 invalid_request_error with code invalid_value (or code).
func badRequest(code, param, format string, args ...any) *protocol.Error {
	return protocol.Errorf(http.StatusBadRequest, code, param, format, args...)
}

// contentParts converts a message's content to Responses content parts of type textType when
// it holds image_url parts: one part per part, text as textType and each
// {"type":"image_url","image_url":{"url","detail"?}} as an input_image part
// {"type":"input_image","image_url","detail"} (detail "auto" when absent). It returns nil
// parts for content without images (ContentText applies), and an error for an image without
// a url, a detail other than low, high or auto, or a part of another type.
func contentParts(raw json.RawMessage, textType string) ([]protocol.ContentPart, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, nil // ContentText reports it
	}
	images := false
	for _, p := range parts {
		images = images || p.Type == "image_url"
	}
	if !images {
		return nil, nil
	}
	var out []protocol.ContentPart
	for i, p := range parts {
		switch p.Type {
		case "text":
			var text string
			if p.Text != nil {
				text = *p.Text
			}
			out = append(out, protocol.ContentPart{Type: textType, Text: text})
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return nil, fmt.Errorf("content[%d]: an image_url part needs image_url.url (a URL or a data URL)", i)
			}
			detail := p.ImageURL.Detail
			switch detail {
			case "":
				detail = "auto"
			case "low", "high", "auto":
			default:
				return nil, fmt.Errorf("content[%d]: image_url.detail %q: want low, high or auto", i, detail)
			}
			b, _ := json.Marshal(struct {
				Type     string `json:"type"`
				ImageURL string `json:"image_url"`
				Detail   string `json:"detail"`
			}{PartInputImage, p.ImageURL.URL, detail})
			out = append(out, protocol.ContentPart{Type: PartInputImage, Raw: b})
		default:
			return nil, fmt.Errorf("content[%d]: part type %q is not supported (text and image_url only)", i, p.Type)
		}
	}
	return out, nil
}

// ContentText returns the text of a message's content: a JSON string, null / absent (""), or
// an array of parts whose "text" parts are concatenated. Other part types (image_url, which
// contentParts converts) give an error.
func ContentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content must be a string or an array of parts")
	}
	var b strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "refusal":
			b.WriteString(p.Refusal)
		default:
			return "", fmt.Errorf("content[%d]: part type %q is not supported (text only)", i, p.Type)
		}
	}
	return b.String(), nil
}

// TextContent returns s as a JSON string content.
func TextContent(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// ItemsFromMessages converts a request's messages to Response items (see the package doc).
// The first message's text becomes instructions when its role is system (instructions is
// then non-nil). Errors are 400s naming the message ("messages[2].role"); a content string or
// part text over protocol.MaxTextLength characters is string_above_max_length, as in a create.
func ItemsFromMessages(msgs []Message) (instructions *string, items []protocol.Item, _ error) {
	for i := range msgs {
		m := &msgs[i]
		param := fmt.Sprintf("messages[%d]", i)
		parts, err := contentParts(m.Content, protocol.PartInputText)
		if err != nil {
			return nil, nil, badRequest(protocol.CodeInvalidValue, param+".content", "%s: %v", param, err)
		}
		if parts != nil {
			for j := range parts {
				if err := protocol.CheckTextLength(fmt.Sprintf("%s.content[%d].text", param, j), parts[j].Text); err != nil {
					return nil, nil, err
				}
			}
			if m.Role != protocol.RoleUser {
				return nil, nil, badRequest(protocol.CodeInvalidValue, param+".content",
					"%s: image_url parts are accepted in user messages only, not in a %q message.", param, m.Role)
			}
			items = append(items, protocol.Item{Type: protocol.ItemMessage, Role: m.Role, Status: protocol.StatusCompleted, Content: parts})
			continue
		}
		text, err := ContentText(m.Content)
		if err != nil {
			return nil, nil, badRequest(protocol.CodeInvalidValue, param+".content", "%s: %v", param, err)
		}
		if err := checkTextLength(param+".content", m.Content, text); err != nil {
			return nil, nil, err
		}
		switch m.Role {
		case protocol.RoleSystem, protocol.RoleDeveloper, protocol.RoleUser:
			if i == 0 && m.Role == protocol.RoleSystem {
				instructions = &text
				continue
			}
			items = append(items, message(m.Role, protocol.PartInputText, text))
		case protocol.RoleAssistant:
			if text != "" || len(m.ToolCalls) == 0 {
				items = append(items, message(m.Role, protocol.PartOutputText, text))
			}
			for j, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Function.Name == "" {
					return nil, nil, badRequest(protocol.CodeMissingRequiredParameter, fmt.Sprintf("%s.tool_calls[%d]", param, j),
						"%s.tool_calls[%d] needs an id and a function.name.", param, j)
				}
				items = append(items, protocol.Item{Type: protocol.ItemFunctionCall, CallID: tc.ID, Name: tc.Function.Name,
					Arguments: tc.Function.Arguments, Status: protocol.StatusCompleted})
			}
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, badRequest(protocol.CodeMissingRequiredParameter, param+".tool_call_id",
					"%s: a tool message needs tool_call_id.", param)
			}
			items = append(items, protocol.Item{Type: protocol.ItemFunctionCallOutput, CallID: m.ToolCallID, Output: text})
		case "":
			return nil, nil, badRequest(protocol.CodeMissingRequiredParameter, param+".role", "%s has no role.", param)
		default:
			return nil, nil, badRequest(protocol.CodeInvalidValue, param+".role",
				"%s.role %q: want system, developer, user, assistant or tool.", param, m.Role)
		}
	}
	return instructions, items, nil
}

// checkTextLength holds a message's content to the limit /v1/responses holds a message to:
// string_above_max_length (400) for a content string, or one part's text or refusal, over
// protocol.MaxTextLength characters, with param the content ("messages[3].content") or the
// part ("messages[3].content[1].text"). text is ContentText of raw: the parts are looked at
// again only when their joined text is over the limit.
func checkTextLength(param string, raw json.RawMessage, text string) *protocol.Error {
	if len(text) <= protocol.MaxTextLength {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] == '"' {
		return protocol.CheckTextLength(param, text)
	}
	var parts []struct {
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil // ContentText read it: this does not happen
	}
	for j, p := range parts {
		if err := protocol.CheckTextLength(fmt.Sprintf("%s[%d].text", param, j), p.Text); err != nil {
			return err
		}
		if err := protocol.CheckTextLength(fmt.Sprintf("%s[%d].refusal", param, j), p.Refusal); err != nil {
			return err
		}
	}
	return nil
}

func message(role, partType, text string) protocol.Item {
	return protocol.Item{Type: protocol.ItemMessage, Role: role, Status: protocol.StatusCompleted,
		Content: []protocol.ContentPart{{Type: partType, Text: text}}}
}

// SettingsFromRequest converts a request's generation fields to sampler.Settings
// (instructions from ItemsFromMessages). parallel_tool_calls defaults to true;
// max_completion_tokens wins over max_tokens.
func SettingsFromRequest(req *Request, instructions *string) (sampler.Settings, error) {
	s := sampler.Settings{Model: req.Model, ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Temperature: req.Temperature, TopP: req.TopP, PresencePenalty: req.PresencePenalty, FrequencyPenalty: req.FrequencyPenalty,
		ReasoningEffort: req.ReasoningEffort, Verbosity: req.Verbosity, Metadata: req.Metadata}
	if instructions != nil {
		s.Instructions = *instructions
	}
	for i, t := range req.Tools {
		if t.Type != protocol.ToolFunction || t.Function.Name == "" {
			return s, badRequest(protocol.CodeInvalidValue, fmt.Sprintf("tools[%d]", i),
				"tools[%d]: only function tools with a function.name are supported.", i)
		}
		s.Tools = append(s.Tools, protocol.Tool{Type: protocol.ToolFunction, Name: t.Function.Name,
			Description: t.Function.Description, Parameters: t.Function.Parameters, Strict: t.Function.Strict})
	}
	tc, perr := toolChoiceFrom(req.ToolChoice)
	if perr != nil {
		return s, perr
	}
	s.ToolChoice = tc
	switch {
	case req.MaxCompletionTokens != nil:
		s.MaxOutputTokens = max(*req.MaxCompletionTokens, 0)
	case req.MaxTokens != nil:
		s.MaxOutputTokens = max(*req.MaxTokens, 0)
	}
	if s.TextFormat, perr = textFormatFrom(req.ResponseFormat); perr != nil {
		return s, perr
	}
	return s, nil
}

// toolChoiceFrom converts a chat tool_choice to the Responses form.
func toolChoiceFrom(raw json.RawMessage) (protocol.ToolChoice, *protocol.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return protocol.ToolChoice{}, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case protocol.ToolChoiceAuto, protocol.ToolChoiceNone, protocol.ToolChoiceRequired:
			return protocol.ToolChoice{Mode: mode}, nil
		}
		return protocol.ToolChoice{}, badRequest(protocol.CodeInvalidValue, "tool_choice", "tool_choice %q: want auto, none, required or a function object.", mode)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Type != protocol.ToolFunction || obj.Function.Name == "" {
		return protocol.ToolChoice{}, badRequest(protocol.CodeInvalidValue, "tool_choice", `tool_choice: want "auto", "none", "required" or {"type":"function","function":{"name":…}}.`)
	}
	return protocol.ToolChoice{Name: obj.Function.Name}, nil
}

// responseFormat is a chat response_format.
type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
}

// textFormatFrom converts response_format to text.format (nil for text or absent).
func textFormatFrom(raw json.RawMessage) (json.RawMessage, *protocol.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var rf responseFormat
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, badRequest(protocol.CodeInvalidType, "response_format", "response_format must be an object.")
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		var js map[string]json.RawMessage
		if json.Unmarshal(rf.JSONSchema, &js) != nil || js["name"] == nil {
			return nil, badRequest(protocol.CodeMissingRequiredParameter, "response_format.json_schema",
				"response_format json_schema needs a json_schema object with a name.")
		}
		js["type"] = json.RawMessage(`"json_schema"`)
		b, _ := json.Marshal(js)
		return b, nil
	}
	return nil, badRequest(protocol.CodeInvalidValue, "response_format.type", "response_format.type %q: want text, json_object or json_schema.", rf.Type)
}
