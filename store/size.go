package store

import "github.com/tetherd/tether/protocol"

// Size estimates the memory a stored response holds, in bytes: its items' text (Input,
// Response.Output, Chain) plus a fixed overhead. It is the unit of the byte bounds
// (-store-bytes) of every implementation. Keep the accounting here, in one place.
func Size(r *Response) int64 {
	return 512 + ItemsBytes(r.Input) + ItemsBytes(r.Response.Output) + ItemsBytes(r.Chain)
}

// ItemsBytes estimates the memory held by items, in bytes: their text plus a fixed overhead
// each (session.ItemsBytes is the same estimate).
func ItemsBytes(items []protocol.Item) int64 {
	var n int64
	for i := range items {
		it := &items[i]
		n += 128 + int64(len(it.Arguments)+len(it.Output)+len(it.Raw)+len(it.Name)+len(it.CallID)+len(it.ID))
		for j := range it.Content {
			n += 32 + int64(len(it.Content[j].Text)+len(it.Content[j].Raw))
		}
	}
	return n
}
