package protocol

import (
	"encoding/json"
)

// Item types (the "type" field of an input or output item).
const (
	ItemMessage            = "message"
	ItemFunctionCall       = "function_call"
	ItemFunctionCallOutput = "function_call_output"
	ItemReasoning          = "reasoning"
	// ItemReference is an input item {"type":"item_reference","id"} naming an earlier item; the
	// shapes replace it by that item before the model sees it.
	ItemReference = "item_reference"
	// ItemCompaction is a compaction item {"type":"compaction","id","encrypted_content"} issued
	// by POST /v1/responses/compact; it stands for the items it compacted.
	ItemCompaction = "compaction"
)

// Item statuses.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
)

// Message roles. Any other role is rejected with invalid_value.
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
// the Responses API's output and input items.
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

// MarshalJSON encodes the item in the wire shape of its type (see AppendEvent): a message
// {id?, type, status?, content, role}, a function_call {id?, type, status?, arguments, call_id,
// name}, a function_call_output {id?, type, status?, call_id, output} (OutputParts as an array
// when non-nil, else Output as a string); other types emit Raw (compacted), or {id?, type}
// without Raw.
func (it Item) MarshalJSON() ([]byte, error) {
	return appendItem(nil, &it), nil
}

// AppendJSON appends it encoded as MarshalJSON encodes it to dst and returns the extended
// buffer.
func (it *Item) AppendJSON(dst []byte) []byte { return appendItem(dst, it) }

// UnmarshalJSON decodes one input or output item with the strict rules of DecodeClientEvent;
// the error is an *Error whose Param is relative to the item ("content[0].text").
func (it *Item) UnmarshalJSON(data []byte) error {
	var v Item
	err := decodeText(data, "", false, func(d *dec) *Error { return d.item(&v) })
	return setUnlessInvalid(it, v, err)
}

// MarshalJSON encodes the part; output_text always carries "annotations":[] and "logprobs":[],
// refusal is {type, refusal}, other modelled types {type, text}, anything else Raw.
func (p ContentPart) MarshalJSON() ([]byte, error) {
	return appendPart(nil, &p), nil
}

// UnmarshalJSON decodes one content part with the strict rules of DecodeClientEvent.
func (p *ContentPart) UnmarshalJSON(data []byte) error {
	var v ContentPart
	err := decodeText(data, "", false, func(d *dec) *Error { return d.part(&v) })
	return setUnlessInvalid(p, v, err)
}
