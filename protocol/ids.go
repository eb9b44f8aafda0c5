package protocol

import "crypto/rand"

// NewID returns a new opaque id: prefix, "_", and 32 hex digits of a random UUID
// (e.g. "resp_3f0c…"). Ids are unique across connections and servers.
func NewID(prefix string) string {
	var u [16]byte
	_, _ = rand.Read(u[:])  // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40 // a version 4 (random) UUID, as before
	u[8] = u[8]&0x3f | 0x80
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
	out := make([]Item, len(items))
	copy(out, items)
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
