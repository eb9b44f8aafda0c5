package store

import (
	"encoding/json"

	"github.com/tetherd/tether/protocol"
)

// Size estimates the memory a stored response holds, in bytes: its items (Input,
// Response.Output, Chain), its echoed settings (instructions, tools, tool_choice, text format,
// metadata: a tool description can be megabytes) and a fixed overhead. It is the unit of the
// byte bounds (-store-bytes, -key-store-bytes) of every implementation. Keep the accounting
// here, in one place.
func Size(r *Response) int64 {
	return 512 + ItemsBytes(r.Input) + ResponseBytes(&r.Response) + ItemsBytes(r.Chain)
}

// ResponseBytes estimates the memory held by a Response object: its output items and its
// echoed settings.
func ResponseBytes(r *protocol.Response) int64 {
	return ItemsBytes(r.Output) + SettingsBytes(r.Instructions, r.Tools, r.ToolChoice.Raw, r.Text.Format, r.Metadata)
}

// SettingsBytes estimates the memory of a request's settings besides its items, in bytes of
// their JSON text plus a fixed overhead (session.SettingsBytes uses it for rollouts).
func SettingsBytes(instructions *string, tools []protocol.Tool, choice, format json.RawMessage, meta map[string]string) int64 {
	n := int64(512 + len(choice) + len(format))
	if instructions != nil {
		n += int64(len(*instructions))
	}
	for i := range tools {
		t := &tools[i]
		n += 64 + int64(len(t.Type)+len(t.Name)+len(t.Parameters)+len(t.Raw))
		if t.Description != nil {
			n += int64(len(*t.Description))
		}
	}
	for k, v := range meta {
		n += 32 + int64(len(k)+len(v))
	}
	return n
}

// ItemsBytes estimates the memory held by items, in bytes: their text plus a fixed overhead
// each, and a fixed overhead plus the text and raw JSON of each content part — a message's
// content and a function_call_output's array of output parts (an input_image part carries its
// data URL in Raw). session.ItemsBytes is the same estimate.
func ItemsBytes(items []protocol.Item) int64 {
	var n int64
	for i := range items {
		it := &items[i]
		n += 128 + int64(len(it.Arguments)+len(it.Output)+len(it.Raw)+len(it.Name)+len(it.CallID)+len(it.ID))
		n += partsBytes(it.Content) + partsBytes(it.OutputParts)
	}
	return n
}

// partsBytes estimates the memory held by content parts: 32 bytes each plus their text and raw
// JSON.
func partsBytes(parts []protocol.ContentPart) int64 {
	var n int64
	for j := range parts {
		n += 32 + int64(len(parts[j].Text)+len(parts[j].Raw))
	}
	return n
}
