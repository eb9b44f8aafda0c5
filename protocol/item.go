package protocol

import (
	"encoding/json"
)

// Item types (the "type" field of an input or output item; reference §8.4, §8.5).
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
	ItemReasoning          = "reasoning"
)

// Item statuses.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
)

// Message roles (reference §8.5). Any other role is rejected with invalid_value.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleDeveloper = "developer"
)

// Content part types.
const (
	PartInputText  = "input_text"
	PartOutputText = "output_text"
	PartRefusal    = "refusal"
	PartSummary    = "summary_text"
	PartReasoning  = "reasoning_text"
)

// Item is one input or output item of a Response: a message, a function_call, a
// function_call_output, or any other type carried verbatim in Raw (reasoning, hosted-tool items).
// Fields that do not belong to Type are zero. Decoding normalises string content into one
// input_text (or output_text for assistant messages) part; encoding emits the shapes of
// reference §8.4 (output items) and §8.5 (input items).
type Item struct {
	Type   string
	ID     string // "msg_…", "fc_…"; empty on input items that carried none
	Status string // in_progress | completed | incomplete; empty when the client sent none

	// message
	Role    string
	Content []ContentPart

	// function_call and function_call_output
	CallID    string
	Name      string // function_call
	Arguments string // function_call: JSON text
	Output    string // function_call_output: the text (parts are joined)

	// OutputParts holds a function_call_output's output when the client sent an array of parts.
	OutputParts []ContentPart

	// Raw is the verbatim JSON of an item type this package does not model (e.g. reasoning).
	Raw json.RawMessage
}

// ContentPart is one part of a message's content: input_text, output_text, refusal,
// summary_text, reasoning_text; other part types (input_image, input_file) are kept in Raw.
type ContentPart struct {
	Type string
	Text string // the text, or the refusal for type refusal
	Raw  json.RawMessage
}

// Text returns the text of a message item: its text parts concatenated. Other items give "".
func (it *Item) Text() string {
	if len(it.Content) == 1 {
		return it.Content[0].Text
	}
	n := 0
	for i := range it.Content {
		n += len(it.Content[i].Text)
	}
	b := make([]byte, 0, n)
	for i := range it.Content {
		b = append(b, it.Content[i].Text...)
	}
	return string(b)
}

var emptyArray = json.RawMessage("[]")

// MarshalJSON encodes the item in the wire shape of its type.
func (it Item) MarshalJSON() ([]byte, error) {
	switch it.Type {
	case ItemMessage:
		content := it.Content
		if content == nil {
			content = []ContentPart{}
		}
		return json.Marshal(struct {
			ID      string        `json:"id,omitempty"`
			Type    string        `json:"type"`
			Status  string        `json:"status,omitempty"`
			Content []ContentPart `json:"content"`
			Role    string        `json:"role"`
		}{it.ID, it.Type, it.Status, content, it.Role})
	case ItemFunctionCall:
		return json.Marshal(struct {
			ID        string `json:"id,omitempty"`
			Type      string `json:"type"`
			Status    string `json:"status,omitempty"`
			Arguments string `json:"arguments"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
		}{it.ID, it.Type, it.Status, it.Arguments, it.CallID, it.Name})
	case ItemFunctionCallOutput:
		var out any = it.Output
		if it.OutputParts != nil {
			out = it.OutputParts
		}
		return json.Marshal(struct {
			ID     string `json:"id,omitempty"`
			Type   string `json:"type"`
			Status string `json:"status,omitempty"`
			CallID string `json:"call_id"`
			Output any    `json:"output"`
		}{it.ID, it.Type, it.Status, it.CallID, out})
	}
	if len(it.Raw) > 0 {
		return it.Raw, nil
	}
	return json.Marshal(struct {
		ID   string `json:"id,omitempty"`
		Type string `json:"type"`
	}{it.ID, it.Type})
}

// MarshalJSON encodes the part; output_text always carries "annotations":[] and "logprobs":[].
func (p ContentPart) MarshalJSON() ([]byte, error) {
	switch p.Type {
	case PartOutputText:
		return json.Marshal(struct {
			Type        string          `json:"type"`
			Annotations json.RawMessage `json:"annotations"`
			Logprobs    json.RawMessage `json:"logprobs"`
			Text        string          `json:"text"`
		}{p.Type, emptyArray, emptyArray, p.Text})
	case PartRefusal:
		return json.Marshal(struct {
			Type    string `json:"type"`
			Refusal string `json:"refusal"`
		}{p.Type, p.Text})
	case PartInputText, PartSummary, PartReasoning:
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{p.Type, p.Text})
	}
	if len(p.Raw) > 0 {
		return p.Raw, nil
	}
	return json.Marshal(struct {
		Type string `json:"type"`
	}{p.Type})
}
