package chatapi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/tetherd/tether/internal/chatwire"
	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// answer is the sampler.Output of one request: it collects the generated items and, when
// streaming, writes each delta as a chat.completion.chunk at once.
type answer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	stream  bool
	id      string
	created int64
	model   string
	// items are the generated items: assistant messages and function_calls, in order.
	items   []protocol.Item
	calls   int             // function_calls among items
	used    map[string]bool // call_ids of the request and of items
	started bool            // the stream's headers and role chunk are written
	buf     []byte
}

// Text implements sampler.Output.
func (a *answer) Text(delta string) error {
	if n := len(a.items); n == 0 || a.items[n-1].Type != protocol.ItemMessage {
		a.items = append(a.items, protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleAssistant, Status: protocol.StatusCompleted,
			Content: []protocol.ContentPart{{Type: protocol.PartOutputText}}})
	}
	part := &a.items[len(a.items)-1].Content[0]
	part.Text += delta
	if !a.stream || delta == "" {
		return nil
	}
	return a.chunk(chatwire.Delta{Content: &delta}, nil)
}

// Call implements sampler.Output: the engine's callID is kept when new, else one is made.
func (a *answer) Call(name, callID string) error {
	if callID == "" || a.used[callID] {
		callID = newID("call_")
	}
	a.used[callID] = true
	a.items = append(a.items, protocol.Item{Type: protocol.ItemFunctionCall, CallID: callID, Name: name, Status: protocol.StatusCompleted})
	a.calls++
	if !a.stream {
		return nil
	}
	idx := a.calls - 1
	return a.chunk(chatwire.Delta{ToolCalls: []chatwire.ToolCall{{Index: &idx, ID: callID, Type: protocol.ToolFunction, Function: chatwire.FunctionCall{Name: name}}}}, nil)
}

// Arguments implements sampler.Output.
func (a *answer) Arguments(delta string) error {
	n := len(a.items)
	if n == 0 || a.items[n-1].Type != protocol.ItemFunctionCall {
		return sampler.ErrNoCall
	}
	a.items[n-1].Arguments += delta
	if !a.stream || delta == "" {
		return nil
	}
	idx := a.calls - 1
	return a.chunk(chatwire.Delta{ToolCalls: []chatwire.ToolCall{{Index: &idx, Function: chatwire.FunctionCall{Arguments: delta}}}}, nil)
}

// begin writes the stream's headers and its role chunk, once.
func (a *answer) begin() error {
	if a.started {
		return nil
	}
	a.started = true
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
	return a.send(&chatwire.Chunk{Choices: []chatwire.ChunkChoice{{Delta: chatwire.Delta{Role: protocol.RoleAssistant}}}})
}

// chunk writes one delta (with a finish reason when non-nil).
func (a *answer) chunk(d chatwire.Delta, finish *string) error {
	if err := a.begin(); err != nil {
		return err
	}
	return a.send(&chatwire.Chunk{Choices: []chatwire.ChunkChoice{{Delta: d, FinishReason: finish}}})
}

// send writes c as one SSE data event and flushes it.
func (a *answer) send(c *chatwire.Chunk) error {
	c.ID, c.Object, c.Created, c.Model = a.id, chatwire.ObjectChunk, a.created, a.model
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return a.write(b)
}

func (a *answer) write(data []byte) error {
	a.buf = append(append(append(a.buf[:0], "data: "...), data...), "\n\n"...)
	if _, err := a.w.Write(a.buf); err != nil {
		return err
	}
	return a.rc.Flush()
}

// finishReason is the choice's finish_reason for a step's result.
func (a *answer) finishReason(res *sampler.StepResult) string {
	switch {
	case res.Incomplete != "":
		return chatwire.FinishLength
	case a.calls > 0:
		return chatwire.FinishToolCalls
	}
	return chatwire.FinishStop
}

// message returns the completion's assistant message: the text of its messages joined, and
// its calls.
func (a *answer) message() chatwire.AnswerMessage {
	m := chatwire.AnswerMessage{Role: protocol.RoleAssistant}
	text, has := "", false
	for i := range a.items {
		it := &a.items[i]
		switch it.Type {
		case protocol.ItemMessage:
			text, has = text+it.Text(), true
		case protocol.ItemFunctionCall:
			m.ToolCalls = append(m.ToolCalls, chatwire.ToolCall{ID: it.CallID, Type: protocol.ToolFunction,
				Function: chatwire.FunctionCall{Name: it.Name, Arguments: it.Arguments}})
		}
	}
	if has || len(m.ToolCalls) == 0 {
		m.Content = &text
	}
	return m
}

// usage converts a step's result to chat usage and llama.cpp timings.
func usage(res *sampler.StepResult) (chatwire.Usage, chatwire.Timings) {
	cached := protocol.CachedTokens(res.CachedTokens, res.InputTokens)
	u := chatwire.Usage{PromptTokens: res.InputTokens, CompletionTokens: res.OutputTokens, TotalTokens: res.InputTokens + res.OutputTokens,
		PromptTokensDetails: &chatwire.PromptTokensDetails{CachedTokens: cached}}
	return u, chatwire.Timings{CacheN: cached, PromptN: res.InputTokens - cached, PredictedN: res.OutputTokens}
}

// newID returns prefix followed by 32 hex digits.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
