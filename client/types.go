package client

import (
	"encoding/json"
	"strings"

	"github.com/tetherd/tether/protocol"
)

// Item is one item of a Response's output or of a request's input: a "message", a
// "function_call" or a "function_call_output" (other types keep their JSON in Raw). Build
// input items with [UserMessage] and [Call.Output]. It is not protocol.Item: a client decodes
// leniently (members it does not name are kept in Raw and sent back as they came), where the
// server's item decodes strictly and rejects them.
type Item struct {
	Type      string          `json:"type,omitempty"`
	ID        string          `json:"id,omitempty"`
	Status    string          `json:"status,omitempty"`
	Role      string          `json:"role,omitempty"`    // message: "user", "assistant", "system", "developer"
	Content   json.RawMessage `json:"content,omitempty"` // message: a string or an array of parts
	CallID    string          `json:"call_id,omitempty"` // function_call, function_call_output
	Name      string          `json:"name,omitempty"`    // function_call
	Arguments string          `json:"arguments,omitempty"`
	Output    string          `json:"output,omitempty"` // function_call_output
	// Raw is the item as it was decoded; when set, it is also what MarshalJSON sends.
	Raw json.RawMessage `json:"-"`
}

type itemFields Item

// UnmarshalJSON decodes an item and keeps its JSON in Raw.
func (it *Item) UnmarshalJSON(b []byte) error {
	var f itemFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*it = Item(f)
	it.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// MarshalJSON sends Raw when it is set (an item received from the server is sent back as it
// came); otherwise the fields. A function_call_output always carries "output", even "".
func (it Item) MarshalJSON() ([]byte, error) {
	if len(it.Raw) > 0 {
		return it.Raw, nil
	}
	if it.Type == "function_call_output" {
		return json.Marshal(struct {
			Type   string `json:"type"`
			ID     string `json:"id,omitempty"`
			CallID string `json:"call_id"`
			Output string `json:"output"`
		}{it.Type, it.ID, it.CallID, it.Output})
	}
	return json.Marshal(itemFields(it))
}

// Text returns a message's text: the string content, or its text parts joined.
func (it Item) Text() string {
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(it.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// UserMessage is an input message with role "user" and text content.
func UserMessage(text string) Item {
	c, _ := json.Marshal(text)
	return Item{Type: "message", Role: "user", Content: c}
}

// Tool is a function tool of a create request.
type Tool struct {
	Type        string `json:"type"` // "function"
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Parameters  any    `json:"parameters,omitempty"` // a JSON Schema object
	Strict      *bool  `json:"strict,omitempty"`
}

// FunctionTool is a Tool of type "function".
func FunctionTool(name, description string, parameters any) Tool {
	return Tool{Type: "function", Name: name, Description: description, Parameters: parameters}
}

// CreateRequest is the body of response.create: the same fields as a POST /v1/responses body.
// Only Model is required. Fields it does not name go in Extra, which is merged into the frame
// (Extra cannot override the named fields).
type CreateRequest struct {
	Model              string            `json:"model"`
	Input              []Item            `json:"input,omitempty"`
	Instructions       string            `json:"instructions,omitempty"`
	Tools              []Tool            `json:"tools,omitempty"`
	ToolChoice         any               `json:"tool_choice,omitempty"` // "auto", "none", "required" or an object
	ParallelToolCalls  *bool             `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens    int               `json:"max_output_tokens,omitempty"` // 0: the server's default
	Temperature        *float64          `json:"temperature,omitempty"`
	Store              *bool             `json:"store,omitempty"` // nil: the server's default (true)
	Metadata           map[string]string `json:"metadata,omitempty"`
	PreviousResponseID string            `json:"previous_response_id,omitempty"`
	// StreamID names the lane (docs/append-protocol.md, Lanes): rollouts of different lanes
	// of one Conn sample concurrently, those of one lane one after another; "" is the
	// default lane. Its continuations stay in it.
	StreamID string         `json:"stream_id,omitempty"`
	Extra    map[string]any `json:"-"`
}

// lane is the request's lane: StreamID, or a stream_id string in Extra.
func (q CreateRequest) lane() string {
	if q.StreamID != "" {
		return q.StreamID
	}
	s, _ := q.Extra["stream_id"].(string)
	return s
}

// settings returns the request's members without input and previous_response_id: what a
// continuation create (public shape, reconnect) sends again.
func (q CreateRequest) settings() (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	for k, v := range q.Extra {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m[k] = b
	}
	q.Input, q.PreviousResponseID = nil, ""
	b, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	var named map[string]json.RawMessage
	if err := json.Unmarshal(b, &named); err != nil {
		return nil, err
	}
	for k, v := range named {
		m[k] = v
	}
	delete(m, "type")
	delete(m, "input")
	delete(m, "previous_response_id")
	return m, nil
}

// Usage is a Response's token usage (protocol.Usage: the same wire shape). In the append
// shape it is cumulative over the rollout.
type Usage = protocol.Usage

// InputTokensDetails splits Usage.InputTokens: CachedTokens are context tokens the server did
// not render or prefill again; Tether reports CacheWriteTokens as 0.
type InputTokensDetails = protocol.InputTokensDetails

// OutputTokensDetails splits Usage.OutputTokens.
type OutputTokensDetails = protocol.OutputTokensDetails

// Response is a Response object: status "in_progress", "completed", "incomplete" or "failed".
type Response struct {
	ID                 string             `json:"id"`
	Status             string             `json:"status"`
	Model              string             `json:"model"`
	PreviousResponseID string             `json:"previous_response_id"`
	Output             []Item             `json:"output"`
	Usage              *Usage             `json:"usage"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	// Raw is the Response as decoded. For a merged public-shape Response it is the last
	// segment's.
	Raw json.RawMessage `json:"-"`
}

type responseFields Response

// UnmarshalJSON decodes a Response and keeps its JSON in Raw.
func (r *Response) UnmarshalJSON(b []byte) error {
	var f responseFields
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*r = Response(f)
	r.Raw = append(json.RawMessage(nil), b...)
	return nil
}

// OutputText is the text of the Response's assistant messages, joined.
func (r *Response) OutputText() string {
	var b strings.Builder
	for _, it := range r.Output {
		if it.Type == "message" {
			b.WriteString(it.Text())
		}
	}
	return b.String()
}

// ResponseError is response.error of a failed Response.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails is response.incomplete_details: Reason is "max_output_tokens",
// "cancelled", "idle_timeout", "server_shutdown" or "connection_limit".
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// Call is a function call the rollout waits for.
type Call struct {
	ID        string // the item id, fc_…
	CallID    string // call_…: what the output must name
	Name      string
	Arguments string // JSON text
}

// Output is the function_call_output item answering c.
func (c Call) Output(output string) Item {
	return Item{Type: "function_call_output", CallID: c.CallID, Output: output}
}

// Suspension is a rollout waiting for tool outputs (response.done).
type Suspension struct {
	ResponseID string // the Response to append to
	Calls      []Call // the pending calls, in output order; Append must answer each once
	Output     []Item // the model items since the previous suspension
	Usage      Usage  // cumulative over the rollout
}

// Event is one server event of a rollout. The fields a type does not carry are zero.
type Event struct {
	Type           string // "response.created", "response.output_text.delta", …
	SequenceNumber int    // -1 when the event has none
	ResponseID     string // lifecycle events: response.id; response.done: response_id
	OutputIndex    int
	ItemID         string
	ContentIndex   int
	Delta          string    // *.delta events
	Item           *Item     // response.output_item.added / .done
	Response       *Response // lifecycle and terminal events, as sent
	// Suspended is set on the event that suspends the rollout: response.done (append shape) or
	// a segment's response.completed with function calls (public shape).
	Suspended *Suspension
	// Final is set on the event that ends the rollout: the merged final Response.
	Final *Response
	Raw   json.RawMessage // the frame
}

// wireEvent is every member of a server event the client reads.
type wireEvent struct {
	Type           string    `json:"type"`
	SequenceNumber *int      `json:"sequence_number"`
	StreamID       string    `json:"stream_id"`
	ResponseID     string    `json:"response_id"`
	OutputIndex    int       `json:"output_index"`
	ItemID         string    `json:"item_id"`
	ContentIndex   int       `json:"content_index"`
	Delta          string    `json:"delta"`
	Item           *Item     `json:"item"`
	Response       *Response `json:"response"`
	PendingCallIDs []string  `json:"pending_call_ids"`
	Output         []Item    `json:"output"`
	Usage          *Usage    `json:"usage"`
	Status         int       `json:"status"`
	Error          *struct {
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
		Message string  `json:"message"`
	} `json:"error"`
}

func (w *wireEvent) event(raw []byte) Event {
	ev := Event{Type: w.Type, SequenceNumber: -1, ResponseID: w.ResponseID, OutputIndex: w.OutputIndex,
		ItemID: w.ItemID, ContentIndex: w.ContentIndex, Delta: w.Delta, Item: w.Item, Response: w.Response, Raw: raw}
	if w.SequenceNumber != nil {
		ev.SequenceNumber = *w.SequenceNumber
	}
	if w.Response != nil {
		ev.ResponseID = w.Response.ID
	}
	return ev
}

func (w *wireEvent) apiError() *Error {
	if w.Error == nil {
		return &Error{Status: w.Status, Message: "error frame without error"}
	}
	e := &Error{Status: w.Status, Type: w.Error.Type, Code: w.Error.Code, Message: w.Error.Message}
	if w.Error.Param != nil {
		e.Param = *w.Error.Param
	}
	return e
}

// isTerminal reports whether typ ends a Response.
func isTerminal(typ string) bool {
	return typ == "response.completed" || typ == "response.incomplete" || typ == "response.failed"
}
