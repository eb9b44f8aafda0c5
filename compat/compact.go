package compat

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session"
)

// CompactResource is the reply of POST /v1/responses/compact (Open Responses
// CompactResource): the compacted window as output items.
type CompactResource struct {
	ID        string          `json:"id"`
	Object    string          `json:"object"` // always "response.compaction"
	CreatedAt int64           `json:"created_at"`
	Output    []protocol.Item `json:"output"`
	Usage     protocol.Usage  `json:"usage"`
}

// Compact serves POST /v1/responses/compact (Open Responses compactResponse) for owner: the
// window is the chain of previous_response_id (from the Store, owner-checked) followed by
// input (item_references resolved, compaction items expanded), after instructions as a system
// message (rendered as instructions are); the reply's output is one
// compaction item standing for the whole window. Sending that output as the input of a new
// chain gives the model exactly the window's context again. No model runs, so usage is zero.
// The body takes model (required), input, previous_response_id, instructions and
// prompt_cache_key, plus what the Codex CLI sends (see compactOnly); any other create field is
// unsupported_parameter.
func (h *HTTP) Compact(w http.ResponseWriter, r *http.Request, owner string) {
	body, res, err := h.ReadBody(w, r)
	if err != nil {
		h.fail(w, err)
		return
	}
	defer res.Release() // the body, its decoded window and the reply are held until written
	p, perr := protocol.DecodeCreateParams(r.Context(), body)
	if perr != nil {
		err = perr
	}
	if err == nil {
		err = compactOnly(p)
	}
	if err == nil {
		err = session.CheckFormat(p)
	}
	var window []protocol.Item
	if err == nil {
		window, err = h.window(r.Context(), p, owner)
	}
	if err == nil {
		err = session.CheckCompactionSize(window) // before the budget: no retry would fit it
	}
	var size int64 // the window's bytes: what the compaction encodes, seals and answers
	if err == nil {
		size = session.ItemsBytes(window)
		if !res.Cover(session.DecodeCost(body) + compactCost(size)) {
			err = session.BudgetFullError("this compaction")
		}
	}
	if err != nil {
		WriteError(w, protocol.ErrorOf(err))
		return
	}
	writeEncoded(w, r, size, func() ([]byte, error) {
		item, err := h.Session.Compaction.Compact(window)
		if err != nil {
			return nil, err
		}
		return json.Marshal(&CompactResource{ID: protocol.NewID("resp"), Object: "response.compaction",
			CreatedAt: time.Now().Unix(), Output: []protocol.Item{item}})
	})
}

// compactCost is what a compaction of a window of size bytes of items holds besides its
// request: the window's items (read from the store), the sealed item (a compressed, encrypted
// copy, base64-encoded) and the reply's JSON, counted at session.DecodeFactor per byte.
func compactCost(size int64) int64 {
	return session.DecodeFactor * size
}

// window returns the items a compaction stands for: instructions (as a system message), the
// parent's chain, then input.
func (h *HTTP) window(ctx context.Context, p *protocol.CreateParams, owner string) ([]protocol.Item, error) {
	st := h.Options.Store
	var chain []protocol.Item
	if p.PreviousResponseID != nil && *p.PreviousResponseID != "" {
		var err error
		if chain, err = session.StoredChain(ctx, st, *p.PreviousResponseID, owner); err != nil {
			return nil, err
		}
	}
	live := func(ids []string) map[string]protocol.Item { return h.Session.LiveItems.Find(owner, ids) }
	input, err := session.ResolveItemRefs(ctx, p.Input, live, st, owner)
	if err != nil {
		return nil, err
	}
	input, err = h.Session.Compaction.Expand(input)
	if err != nil {
		return nil, err
	}
	window := make([]protocol.Item, 0, 1+len(chain)+len(input))
	if p.Instructions != nil && *p.Instructions != "" {
		window = append(window, protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleSystem,
			Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: *p.Instructions}}})
	}
	window = protocol.AppendItems(window, chain)
	window = protocol.AppendItems(window, input)
	protocol.AssignIDs(window[len(window)-len(input):])
	return window, nil
}

// compactOnly rejects the create fields compactResponse does not take. The schema's fields
// (model, input, previous_response_id, instructions, prompt_cache_key) are honoured; tools,
// parallel_tool_calls, reasoning, service_tier and text, which the Codex CLI sends with every
// compaction, are validated and accepted: they steer a model's compaction pass, and the sim's
// compaction is lossless (no pass).
func compactOnly(p *protocol.CreateParams) error {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"max_output_tokens", p.MaxOutputTokens != nil},
		{"max_tool_calls", p.MaxToolCalls != nil}, {"metadata", p.Metadata != nil}, {"store", p.Store != nil},
		{"stream", p.Stream}, {"temperature", p.Temperature != nil}, {"top_p", p.TopP != nil},
		{"top_logprobs", p.TopLogprobs != nil}, {"presence_penalty", p.PresencePenalty != nil},
		{"frequency_penalty", p.FrequencyPenalty != nil},
		{"truncation", p.Truncation != nil}, {"user", p.User != nil}, {"safety_identifier", p.SafetyIdentifier != nil},
		{"generate", p.Generate != nil}, {"background", p.Background != nil},
		{"stream_id", p.StreamID != nil}, {"include", p.Include != nil}, {"stream_options", p.IncludeObfuscation != nil},
	} {
		if f.set {
			return protocol.Errorf(http.StatusBadRequest, protocol.CodeUnsupportedParameter, f.name,
				"Unsupported parameter: '%s' is not taken by POST /v1/responses/compact.", f.name)
		}
	}
	return nil
}
