package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// find returns store.FindItems of ids for owner, failing t on a store error.
func find(t *testing.T, s store.Store, owner string, ids ...string) map[string]protocol.Item {
	t.Helper()
	found, err := store.FindItems(context.Background(), s, ids, owner)
	if err != nil {
		t.Fatalf("FindItems %v: %v", ids, err)
	}
	return found
}

// testFindItemsMany: one call finds input and output items spread over many responses of the
// owner (ids repeated, unknown ids left out), and finds none of them for another owner.
func testFindItemsMany(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	for i := range 200 {
		mustPut(t, s, response(fmt.Sprintf("resp_%d", i), "", "key-1", 2))
		mustPut(t, s, response(fmt.Sprintf("other_%d", i), "", "key-2", 1))
	}
	var want []string
	for i := 0; i < 200; i += 7 {
		r := fmt.Sprintf("resp_%d", i)
		want = append(want, "msg_"+r+"_in1", "fc_"+r, "msg_"+r+"_out")
	}
	ids := append(append([]string{}, want...), want[0], "fc_nope", "msg_other_3_out", "fc_other_4")
	found := find(t, s, "key-1", ids...)
	if len(found) != len(want) {
		t.Fatalf("found %d items, want %d", len(found), len(want))
	}
	for _, id := range want {
		if found[id].ID != id {
			t.Fatalf("item %s: found %+v", id, found[id])
		}
	}
	if it := found["fc_resp_14"]; it.CallID != "call_resp_14" || it.Arguments != `{"cmd":"ls"}` {
		t.Fatalf("fc_resp_14 = %+v, want the stored function call", it)
	}
	if it := found["msg_resp_7_in1"]; len(it.Content) != 1 || it.Content[0].Text != "question 1 of resp_7" {
		t.Fatalf("msg_resp_7_in1 = %+v, want the stored message", it)
	}
	// Another owner finds none of key-1's items, and key-1 none of key-2's.
	if got := find(t, s, "key-2", want...); len(got) != 0 {
		t.Fatalf("another owner found %d of key-1's items", len(got))
	}
	if got := find(t, s, "", want...); len(got) != 0 {
		t.Fatalf("the open server's owner found %d of key-1's items", len(got))
	}
	if got := find(t, s, "key-2", "fc_other_4", "fc_resp_0"); len(got) != 1 || got["fc_other_4"].CallID != "call_other_4" {
		t.Fatalf("key-2 found %+v, want only its own fc_other_4", got)
	}
}

// testFindItemsGone: an item of a deleted, replaced or evicted response is not found; the
// items of the responses kept still are.
func testFindItemsGone(t *testing.T, f Factory) {
	s := open(t, f, 3, 0)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		mustPut(t, s, response(id, "", "k", 1))
	}
	if err := s.Delete(ctx, "b", "k"); err != nil {
		t.Fatal(err)
	}
	if got := find(t, s, "k", "fc_b", "msg_b_in0", "fc_a", "fc_c"); len(got) != 2 || got["fc_a"].ID == "" || got["fc_c"].ID == "" {
		t.Fatalf("after Delete b: found %v, want fc_a and fc_c only", keysOf(got))
	}
	// Replacing a with a version without fc_a drops fc_a.
	v2 := response("a", "", "k", 1)
	v2.Response.Output = v2.Response.Output[:1]
	mustPut(t, s, v2)
	if got := find(t, s, "k", "fc_a", "msg_a_out"); len(got) != 1 || got["msg_a_out"].ID == "" {
		t.Fatalf("after replacing a: found %v, want msg_a_out only", keysOf(got))
	}
	// d, e, f and g evict c, a and d (a bound of 3, least recently used first).
	for _, id := range []string{"d", "e", "f", "g"} {
		mustPut(t, s, response(id, "", "k", 1))
	}
	if present(t, s, "a", "k") || present(t, s, "d", "k") {
		t.Fatal("a or d not evicted")
	}
	got := find(t, s, "k", "fc_a", "msg_a_out", "fc_c", "fc_d", "msg_d_in0", "fc_e", "fc_f", "fc_g")
	if len(got) != 3 || got["fc_e"].ID == "" || got["fc_f"].ID == "" || got["fc_g"].ID == "" {
		t.Fatalf("after evictions: found %v, want fc_e, fc_f and fc_g", keysOf(got))
	}
}

// testFindItemsDuplicates: an item id held by several responses (a chain's next input repeats
// an item, as a resolved item_reference does; a client reuses an id) is found while any of them
// is stored; when the copies differ, the copy of the most recently used response wins, and
// within a response its input's copy before its output's.
func testFindItemsDuplicates(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	ctx := context.Background()
	a := response("a", "", "k", 1)
	b := response("b", "a", "k", 1)
	b.Input = append(b.Input, a.Response.Output[1]) // fc_a again, as a resolved reference
	c := response("c", "b", "k", 1)
	c.Chain = chainOf(a, b) // an append-shape rollout: the chain repeats every item
	c.Chain = append(c.Chain, c.Input...)
	c.Chain = append(c.Chain, c.Response.Output...)
	for _, r := range []*store.Response{a, b, c} {
		mustPut(t, s, r)
	}
	if got := find(t, s, "k", "fc_a", "fc_b", "fc_c"); len(got) != 3 || got["fc_a"].CallID != "call_a" {
		t.Fatalf("found %v", got)
	}
	if err := s.Delete(ctx, "a", "k"); err != nil {
		t.Fatal(err)
	}
	if got := find(t, s, "k", "fc_a"); got["fc_a"].CallID != "call_a" {
		t.Fatalf("fc_a after deleting a: %+v, want b's copy", got["fc_a"])
	}
	if err := s.Delete(ctx, "b", "k"); err != nil {
		t.Fatal(err)
	}
	// c's chain holds fc_a, but FindItems looks at inputs and outputs only.
	if got := find(t, s, "k", "fc_a", "fc_b", "fc_c"); len(got) != 1 || got["fc_c"].ID == "" {
		t.Fatalf("after deleting a and b: found %v, want fc_c only", keysOf(got))
	}

	// Copies that differ: a client may give its input items ids of its own.
	x := response("x", "", "k", 0)
	x.Input = []protocol.Item{msg("msg_same", "user", "x's input")}
	x.Response.Output = []protocol.Item{msg("msg_same", "assistant", "x's output")}
	y := response("y", "", "k", 0)
	y.Input = []protocol.Item{msg("msg_same", "user", "y's input")}
	mustPut(t, s, x)
	mustPut(t, s, y)
	text := func() string {
		t.Helper()
		it, ok := find(t, s, "k", "msg_same")["msg_same"]
		if !ok || len(it.Content) != 1 {
			t.Fatalf("msg_same not found: %+v", it)
		}
		return it.Content[0].Text
	}
	if got := text(); got != "y's input" {
		t.Fatalf("msg_same = %q, want the most recently used response's (y)", got)
	}
	if !present(t, s, "x", "k") { // a use of x
		t.Fatal("x missing")
	}
	if got := text(); got != "x's input" {
		t.Fatalf("msg_same = %q after using x, want x's input copy", got)
	}
	if err := s.Delete(ctx, "x", "k"); err != nil {
		t.Fatal(err)
	}
	if got := text(); got != "y's input" {
		t.Fatalf("msg_same = %q after deleting x, want y's", got)
	}
	// The same id under another owner is that owner's own.
	z := response("z", "", "k2", 0)
	z.Input = []protocol.Item{msg("msg_same", "user", "k2's")}
	mustPut(t, s, z)
	if got := text(); got != "y's input" {
		t.Fatalf("msg_same = %q after another owner stored one, want y's", got)
	}
	if it := find(t, s, "k2", "msg_same")["msg_same"]; len(it.Content) != 1 || it.Content[0].Text != "k2's" {
		t.Fatalf("k2's msg_same = %+v", it)
	}
}

func keysOf(m map[string]protocol.Item) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
