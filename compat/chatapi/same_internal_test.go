package chatapi

import (
	"encoding/json"
	"testing"

	"github.com/tetherd/tether/protocol"
)

// TestSameItemComparesImages: two messages (or tool outputs) with the same text and different
// images are different items, so a slot's KV is not reused for a conversation that shows the
// engine another image; equal ones are the same.
func TestSameItemComparesImages(t *testing.T) {
	img := func(url string) protocol.ContentPart {
		return protocol.ContentPart{Type: "input_image", Raw: json.RawMessage(`{"type":"input_image","image_url":"` + url + `"}`)}
	}
	text := protocol.ContentPart{Type: protocol.PartInputText, Text: "what is this?"}
	msg := func(url string) protocol.Item {
		return protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleUser, Content: []protocol.ContentPart{text, img(url)}}
	}
	out := func(url string) protocol.Item {
		return protocol.Item{Type: protocol.ItemFunctionCallOutput, CallID: "c", OutputParts: []protocol.ContentPart{text, img(url)}}
	}
	a, b := msg("https://example.com/a.png"), msg("https://example.com/b.png")
	if sameItem(&a, &b) {
		t.Error("messages with different images compare equal")
	}
	if c := msg("https://example.com/a.png"); !sameItem(&a, &c) {
		t.Error("equal messages compare different")
	}
	x, y := out("https://example.com/a.png"), out("https://example.com/b.png")
	if sameItem(&x, &y) {
		t.Error("tool outputs with different images compare equal")
	}
	if z := out("https://example.com/a.png"); !sameItem(&x, &z) {
		t.Error("equal tool outputs compare different")
	}
}
