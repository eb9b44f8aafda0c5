package session

import (
	"testing"

	"github.com/tetherd/tether/protocol"
)

func liveItem(id, text string) protocol.Item {
	return protocol.Item{Type: protocol.ItemMessage, ID: id, Role: protocol.RoleUser,
		Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: text}}}
}

// TestLiveItemsHolders: items are found per owner, only once added; each add indexes only the
// new part of a context; an id two rollouts hold stays found until both are removed; items
// without an id are not indexed; removing everything leaves an empty index.
func TestLiveItemsHolders(t *testing.T) {
	l := NewLiveItems(nil)
	a, b := &liveHolder{owner: "k1"}, &liveHolder{owner: "k1"}
	other := &liveHolder{owner: "k2"}
	ctx := []protocol.Item{liveItem("msg_1", "one"), liveItem("", "no id"), liveItem("fc_1", "call")}
	l.add(a, ctx[:1])
	if got := l.Find("k1", []string{"msg_1", "fc_1"}); len(got) != 1 || got["msg_1"].Content[0].Text != "one" {
		t.Fatalf("after the first suspension: %v", got)
	}
	l.add(a, ctx)
	l.add(b, []protocol.Item{liveItem("msg_1", "one"), liveItem("msg_b", "b")})
	l.add(other, []protocol.Item{liveItem("msg_x", "x")})
	if got := l.Find("k1", []string{"msg_1", "fc_1", "msg_b", "msg_1", "msg_x"}); len(got) != 3 {
		t.Fatalf("k1 finds %d of its 3 ids (and not k2's): %v", len(got), got)
	}
	if got := l.Find("k2", []string{"msg_1"}); len(got) != 0 {
		t.Fatalf("k2 finds k1's item: %v", got)
	}
	if n := l.Len(); n != 4 {
		t.Fatalf("%d ids indexed, want 4 (msg_1 of k1 once, fc_1, msg_b, msg_x)", n)
	}
	l.remove(a)
	if got := l.Find("k1", []string{"msg_1", "fc_1"}); len(got) != 1 || got["msg_1"].Content[0].Text != "one" {
		t.Fatalf("after a's end, b's msg_1 only: %v", got)
	}
	l.remove(b)
	l.remove(other)
	l.remove(other) // twice is nothing
	if n := l.Len(); n != 0 {
		t.Fatalf("%d ids left in the index", n)
	}
	var none *LiveItems
	none.add(a, ctx)
	none.remove(a)
	if got := none.Find("k1", []string{"msg_1"}); len(got) != 0 || none.Len() != 0 {
		t.Fatal("a nil LiveItems found something")
	}
}

// TestLiveItemsBudget: each entry of the index counts LiveItemBytes in its Budget from when it
// is indexed (a later add counts only the new entries; items without an id count nothing)
// until its rollout leaves the index; removing every rollout brings the budget back to zero,
// and a second remove gives nothing back twice.
func TestLiveItemsBudget(t *testing.T) {
	b := NewBudget(1<<20, 0)
	l := NewLiveItems(b)
	a, other := &liveHolder{owner: "k1"}, &liveHolder{owner: "k2"}
	ctx := []protocol.Item{liveItem("msg_1", "one"), liveItem("", "no id"), liveItem("fc_1", "call")}
	want := func(entries int64, when string) {
		t.Helper()
		if got := b.InUse(); got != entries*LiveItemBytes {
			t.Fatalf("%s: the budget holds %d bytes, want %d entries of %d", when, got, entries, LiveItemBytes)
		}
	}
	l.add(a, ctx[:1])
	want(1, "one item indexed")
	l.add(a, ctx)
	want(2, "the context grown by an item without an id and one with")
	l.add(other, []protocol.Item{liveItem("msg_1", "same id, another owner"), liveItem("msg_2", "two")})
	want(4, "another rollout's two items")
	l.remove(a)
	want(2, "the first rollout gone")
	l.remove(other)
	l.remove(other)
	want(0, "every rollout gone")
	if n := l.Len(); n != 0 {
		t.Fatalf("%d ids left in the index", n)
	}
}
