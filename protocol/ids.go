package protocol

import "github.com/google/uuid"

// NewID returns a new opaque id: prefix, "_", and the 32 hex digits of a random (version 4)
// UUID from github.com/google/uuid (e.g. "resp_3f0c…"). Ids are unique across connections and
// servers.
func NewID(prefix string) string {
	u := uuid.New()
	const hex = "0123456789abcdef"
	b := make([]byte, len(prefix)+1+32)
	n := copy(b, prefix)
	b[n] = '_'
	n++
	for _, x := range u {
		b[n] = hex[x>>4]
		b[n+1] = hex[x&15]
		n += 2
	}
	return string(b)
}

// WithIDs returns a copy of items with an id on every message, function_call and
// function_call_output that had none ("msg_…", "fc_…", "fco_…"), as stored for input_items.
func WithIDs(items []Item) []Item {
	return AssignIDs(AppendItems(make([]Item, 0, len(items)), items))
}

// AssignIDs gives each message, function_call and function_call_output item of items that
// has no id a new one, in place, as WithIDs does, and returns items.
func AssignIDs(out []Item) []Item {
	for i := range out {
		if out[i].ID != "" {
			continue
		}
		switch out[i].Type {
		case ItemMessage:
			out[i].ID = NewID("msg")
		case ItemFunctionCall:
			out[i].ID = NewID("fc")
		case ItemFunctionCallOutput:
			out[i].ID = NewID("fco")
		}
	}
	return out
}
