package chatwire

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// MessagesFromItems appends items converted to chat messages to msgs (package sampler/chat's
// rule): messages keep their role except developer, sent as system (chat templates know
// system, not developer); consecutive function_call items, and the assistant message right
// before them, merge into one assistant message with tool_calls (id = call_id); a
// function_call_output becomes a "tool" message of its text; reasoning items are dropped (a
// chat engine cannot take them back). A message of text parts has a string content; a user
// message with input_image parts has an array of parts, each text part as {"type":"text"} and
// each image as {"type":"image_url","image_url":{"url","detail"?}} (a URL or a data URL). A
// chat tool message carries text only, so the input_image parts of a run of function_call_output
// items go in one user message after its tool messages: for each output with images, a text
// part naming the call ("Images from the output of call <call_id>:") and its images. Any other item type, other
// content parts (input_file, an input_image by file_id or outside a user message or tool
// output) give an error.
func MessagesFromItems(msgs []Message, items []protocol.Item) ([]Message, error) {
	merge := false           // the last message is an assistant message the next function_call may join
	var images []contentPart // the image parts of the current run of tool outputs
	for i := range items {
		it := &items[i]
		if it.Type != protocol.ItemFunctionCallOutput && len(images) > 0 {
			msgs, images = append(msgs, imagesMessage(images)), nil
		}
		switch it.Type {
		case protocol.ItemMessage:
			if err := checkParts(it); err != nil {
				return msgs, err
			}
			role := it.Role
			if role == protocol.RoleDeveloper {
				role = protocol.RoleSystem
			}
			msgs = append(msgs, Message{Role: role, Content: messageContent(it)})
			merge = role == protocol.RoleAssistant
		case protocol.ItemFunctionCall:
			tc := ToolCall{ID: it.CallID, Type: protocol.ToolFunction, Function: FunctionCall{Name: it.Name, Arguments: sendArguments(it.Arguments)}}
			if merge {
				last := &msgs[len(msgs)-1]
				last.ToolCalls = append(last.ToolCalls, tc)
				continue
			}
			msgs = append(msgs, Message{Role: protocol.RoleAssistant, Content: json.RawMessage("null"), ToolCalls: []ToolCall{tc}})
			merge = true
		case protocol.ItemFunctionCallOutput:
			if err := checkOutputParts(it); err != nil {
				return msgs, err
			}
			msgs = append(msgs, Message{Role: "tool", ToolCallID: it.CallID, Content: TextContent(OutputText(it))})
			images = appendOutputImages(images, it)
			merge = false
		case protocol.ItemReasoning:
		default:
			return msgs, fmt.Errorf("item type %q cannot be sent to a Chat Completions engine", it.Type)
		}
	}
	if len(images) > 0 {
		msgs = append(msgs, imagesMessage(images))
	}
	return msgs, nil
}

// checkOutputParts rejects the parts of a function_call_output a chat engine cannot take:
// anything but text parts and input_image parts with an image_url.
func checkOutputParts(it *protocol.Item) error {
	for j := range it.OutputParts {
		switch p := &it.OutputParts[j]; p.Type {
		case protocol.PartInputText, protocol.PartOutputText:
		case PartInputImage:
			if inputImageOf(p).URL == "" {
				return fmt.Errorf("an input_image without image_url (a file_id) in the output of call %s cannot be sent to a Chat Completions engine: give a URL or a data URL", it.CallID)
			}
		default:
			return fmt.Errorf("content part type %q in the output of call %s cannot be sent to a Chat Completions engine (text and images only)", p.Type, it.CallID)
		}
	}
	return nil
}

// appendOutputImages appends a function_call_output's images to parts, led by a text part
// naming its call (see MessagesFromItems); parts unchanged when it has none.
func appendOutputImages(parts []contentPart, it *protocol.Item) []contentPart {
	lead := true
	for j := range it.OutputParts {
		if p := &it.OutputParts[j]; p.Type == PartInputImage {
			if lead {
				text := "Images from the output of call " + it.CallID + ":"
				parts = append(parts, contentPart{Type: "text", Text: &text})
				lead = false
			}
			img := inputImageOf(p)
			parts = append(parts, contentPart{Type: "image_url", ImageURL: &img})
		}
	}
	return parts
}

// imagesMessage is the user message that carries the images of a run of tool outputs.
func imagesMessage(parts []contentPart) Message {
	b, _ := json.Marshal(parts)
	return Message{Role: protocol.RoleUser, Content: b}
}

// sendArguments returns a function_call's arguments as they are sent to an engine: unchanged
// when they are JSON, else as a JSON string holding them (an empty text becomes ""). Engines
// that apply a Jinja chat template parse the arguments of an assistant's tool_calls
// (llama-server answers HTTP 500 "Failed to parse tool call arguments as JSON" to text that is
// not JSON, even empty, and takes any JSON value), while a model without strict mode may have
// written anything there: so the conversation goes on, and the model sees its own text.
func sendArguments(args string) string {
	if json.Valid([]byte(args)) {
		return args
	}
	b, _ := json.Marshal(args)
	return string(b)
}

// CheckItems reports the first item MessagesFromItems cannot convert, as an error holding a
// 400 *protocol.Error naming it (param "input[i]…"), or nil.
func CheckItems(items []protocol.Item) error {
	for i := range items {
		it := &items[i]
		switch it.Type {
		case protocol.ItemMessage:
			if err := checkParts(it); err != nil {
				return badRequest(protocol.CodeInvalidValue, fmt.Sprintf("input[%d].content", i), "input[%d]: %v", i, err)
			}
		case protocol.ItemFunctionCallOutput:
			if err := checkOutputParts(it); err != nil {
				return badRequest(protocol.CodeInvalidValue, fmt.Sprintf("input[%d].output", i), "input[%d]: %v", i, err)
			}
		case protocol.ItemFunctionCall, protocol.ItemReasoning:
		default:
			return badRequest(protocol.CodeInvalidValue, fmt.Sprintf("input[%d].type", i),
				"input[%d]: item type %q cannot be sent to the Chat Completions engine behind this server.", i, it.Type)
		}
	}
	return nil
}

// checkParts rejects content parts a chat message cannot carry: anything but text parts, and
// input_image parts of a user message that have an image_url.
func checkParts(it *protocol.Item) error {
	for j := range it.Content {
		switch p := &it.Content[j]; p.Type {
		case protocol.PartInputText, protocol.PartOutputText, protocol.PartRefusal:
		case PartInputImage:
			if it.Role != protocol.RoleUser {
				return fmt.Errorf("content part type %q in a %s message cannot be sent to a Chat Completions engine (images go in user messages)", p.Type, it.Role)
			}
			if img := inputImageOf(p); img.URL == "" {
				return fmt.Errorf("an input_image without image_url (a file_id) cannot be sent to a Chat Completions engine: give a URL or a data URL")
			}
		default:
			return fmt.Errorf("content part type %q cannot be sent to a Chat Completions engine (text and images only)", p.Type)
		}
	}
	return nil
}

// PartInputImage is the Responses content part type of an image.
const PartInputImage = "input_image"

// ImageURL is the image_url object of a chat image part: the image's URL (https: or a data:
// URL) and the detail hint ("low", "high", "auto"; empty: the engine's default).
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// contentPart is one part of a chat message's content array.
type contentPart struct {
	Type     string    `json:"type"` // "text" or "image_url"
	Text     *string   `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// inputImageOf reads an input_image part's image_url and detail (zero when absent or not
// strings).
func inputImageOf(p *protocol.ContentPart) ImageURL {
	var v struct {
		ImageURL string `json:"image_url"`
		Detail   string `json:"detail"`
	}
	_ = json.Unmarshal(p.Raw, &v)
	return ImageURL{URL: v.ImageURL, Detail: v.Detail}
}

// messageContent is a message's chat content (checkParts has accepted it): its text as a JSON
// string, or, when it holds an image, the array of its parts, one per part.
func messageContent(it *protocol.Item) json.RawMessage {
	images := false
	for j := range it.Content {
		images = images || it.Content[j].Type == PartInputImage
	}
	if !images {
		return TextContent(it.Text())
	}
	var parts []contentPart
	for j := range it.Content {
		p := &it.Content[j]
		if p.Type == PartInputImage {
			img := inputImageOf(p)
			parts = append(parts, contentPart{Type: "image_url", ImageURL: &img})
			continue
		}
		text := p.Text
		parts = append(parts, contentPart{Type: "text", Text: &text})
	}
	b, _ := json.Marshal(parts)
	return b
}

// OutputText is a function_call_output's text: Output, or its text parts joined (images are
// not text: see MessagesFromItems).
func OutputText(it *protocol.Item) string {
	if it.OutputParts == nil {
		return it.Output
	}
	var s strings.Builder
	for _, p := range it.OutputParts {
		if p.Type != PartInputImage {
			s.WriteString(p.Text)
		}
	}
	return s.String()
}

// SetSettings fills the request's generation fields from s: tools (function tools only;
// others are dropped), tool_choice and parallel_tool_calls (only with tools, as OpenAI and
// vLLM reject them without), max_completion_tokens (and max_tokens too when legacyMax),
// temperature, top_p, presence_penalty, frequency_penalty, verbosity, reasoning_effort,
// response_format and metadata.
func (r *Request) SetSettings(s *sampler.Settings, legacyMax bool) {
	r.Model = s.Model
	for _, t := range s.Tools {
		if t.Type == protocol.ToolFunction {
			r.Tools = append(r.Tools, Tool{Type: protocol.ToolFunction, Function: ToolFunction{Name: t.Name,
				Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
		}
	}
	if len(r.Tools) > 0 {
		r.ToolChoice = toolChoiceTo(s.ToolChoice)
		p := s.ParallelToolCalls
		r.ParallelToolCalls = &p
	}
	if s.MaxOutputTokens > 0 {
		n := s.MaxOutputTokens
		r.MaxCompletionTokens = &n
		if legacyMax {
			r.MaxTokens = &n
		}
	}
	r.Temperature, r.TopP, r.ReasoningEffort = s.Temperature, s.TopP, s.ReasoningEffort
	r.PresencePenalty, r.FrequencyPenalty, r.Verbosity = s.PresencePenalty, s.FrequencyPenalty, s.Verbosity
	r.ResponseFormat = responseFormatTo(s.TextFormat)
	if len(s.Metadata) > 0 {
		r.Metadata = s.Metadata
	}
}

// toolChoiceTo converts a Responses tool_choice to the chat form (nil: the engine's default).
func toolChoiceTo(c protocol.ToolChoice) json.RawMessage {
	switch {
	case c.Name != "":
		b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
		return b
	case c.Mode != "":
		return TextContent(c.Mode)
	}
	return nil
}

// responseFormatTo converts text.format to response_format (nil for text).
func responseFormatTo(format json.RawMessage) json.RawMessage {
	var f map[string]json.RawMessage
	if len(format) == 0 || json.Unmarshal(format, &f) != nil {
		return nil
	}
	var typ string
	_ = json.Unmarshal(f["type"], &typ)
	switch typ {
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`)
	case "json_schema":
		delete(f, "type")
		b, _ := json.Marshal(map[string]any{"type": "json_schema", "json_schema": f})
		return b
	}
	return nil
}
