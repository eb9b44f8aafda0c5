package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/session/store"
)

// Factory returns a new, empty store bounded by maxCount responses and maxBytes bytes (as
// store.Size counts them); 0 means the implementation's defaults. The test closes it.
type Factory func(t *testing.T, maxCount int, maxBytes int64) store.Store

// Run runs the conformance suite against the stores of f.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"PutGet", testPutGet},
		{"Replace", testReplace},
		{"Owner", testOwner},
		{"Delete", testDelete},
		{"InputItems", testInputItems},
		{"Chain", testChain},
		{"ChainAppendShape", testChainAppendShape},
		{"ChainMissing", testChainMissing},
		{"EvictLRU", testEvictLRU},
		{"EvictBytes", testEvictBytes},
		{"NonOwnerNoTouch", testNonOwnerNoTouch},
		{"Concurrent", testConcurrent},
		{"FindItemsMany", testFindItemsMany},
		{"FindItemsGone", testFindItemsGone},
		{"FindItemsDuplicates", testFindItemsDuplicates},
		{"KeyQuotaCount", testKeyQuotaCount},
		{"KeyQuotaBytes", testKeyQuotaBytes},
		{"KeyQuotaConcurrent", testKeyQuotaConcurrent},
		{"ParkClaim", testParkClaim},
		{"ParkExpires", testParkExpires},
		{"ParkClaimRace", testParkClaimRace},
		{"ParkReplace", testParkReplace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, f) })
	}
}

func open(t *testing.T, f Factory, maxCount int, maxBytes int64) store.Store {
	s := f(t, maxCount, maxBytes)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func msg(id, role, text string) protocol.Item {
	typ := "input_text"
	if role == "assistant" {
		typ = "output_text"
	}
	return protocol.Item{Type: protocol.ItemMessage, ID: id, Role: role, Status: "completed",
		Content: []protocol.ContentPart{{Type: typ, Text: text}}}
}

// response returns a stored response id (child of parent when set) with n input messages and
// one output message.
func response(id, parent, owner string, n int) *store.Response {
	r := &store.Response{Owner: owner}
	r.Response = protocol.Response{ID: id, Object: "response", CreatedAt: 1700000000, Status: protocol.ResponseCompleted,
		Model: "sim", Metadata: map[string]string{"k": id}, Usage: &protocol.Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}}
	if parent != "" {
		r.Response.PreviousResponseID = &parent
	}
	for i := range n {
		r.Input = append(r.Input, msg(fmt.Sprintf("msg_%s_in%d", id, i), "user", fmt.Sprintf("question %d of %s", i, id)))
	}
	r.Response.Output = []protocol.Item{msg("msg_"+id+"_out", "assistant", "answer of "+id),
		{Type: protocol.ItemFunctionCall, ID: "fc_" + id, CallID: "call_" + id, Name: "exec", Arguments: `{"cmd":"ls"}`, Status: "completed"}}
	return r
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustPut(t *testing.T, s store.Store, r *store.Response) {
	t.Helper()
	if err := s.Put(context.Background(), r); err != nil {
		t.Fatalf("Put %s: %v", r.Response.ID, err)
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: err = %v, want ErrNotFound", what, err)
	}
}

func present(t *testing.T, s store.Store, id, owner string) bool {
	t.Helper()
	_, err := s.Get(context.Background(), id, owner)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get %s: %v", id, err)
	}
	return err == nil
}

func testPutGet(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	ctx := context.Background()
	want := response("resp_a", "resp_parent", "key-1", 2)
	want.Chain = nil
	mustPut(t, s, want)
	got, err := s.Get(ctx, "resp_a", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if js(t, got.Response) != js(t, want.Response) || js(t, got.Input) != js(t, want.Input) || got.Owner != "key-1" || got.Chain != nil {
		t.Fatalf("Get = %s %s %q %v\nwant %s %s", js(t, got.Response), js(t, got.Input), got.Owner, got.Chain, js(t, want.Response), js(t, want.Input))
	}
	_, err = s.Get(ctx, "resp_nope", "key-1")
	wantNotFound(t, "Get unknown", err)
}

func testReplace(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	mustPut(t, s, response("resp_a", "", "", 1))
	v2 := response("resp_a", "", "", 3)
	v2.Response.Status = protocol.ResponseIncomplete
	mustPut(t, s, v2)
	got, err := s.Get(context.Background(), "resp_a", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Response.Status != protocol.ResponseIncomplete || len(got.Input) != 3 {
		t.Fatalf("after replace: status %s, %d input items", got.Response.Status, len(got.Input))
	}
}

func testOwner(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	ctx := context.Background()
	mustPut(t, s, response("resp_a", "", "key-1", 1))
	_, err := s.Get(ctx, "resp_a", "key-2")
	wantNotFound(t, "Get by another owner", err)
	_, err = s.Get(ctx, "resp_a", "")
	wantNotFound(t, "Get without owner", err)
	_, err = s.InputItems(ctx, "resp_a", "key-2", store.Page{})
	wantNotFound(t, "InputItems by another owner", err)
	_, err = s.Chain(ctx, "resp_a", "key-2")
	wantNotFound(t, "Chain by another owner", err)
	wantNotFound(t, "Delete by another owner", s.Delete(ctx, "resp_a", "key-2"))
	if !present(t, s, "resp_a", "key-1") {
		t.Fatal("another owner's Delete removed the response")
	}
}

func testDelete(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	ctx := context.Background()
	mustPut(t, s, response("resp_a", "", "k", 1))
	if err := s.Delete(ctx, "resp_a", "k"); err != nil {
		t.Fatal(err)
	}
	if present(t, s, "resp_a", "k") {
		t.Fatal("present after Delete")
	}
	wantNotFound(t, "second Delete", s.Delete(ctx, "resp_a", "k"))
	_, err := s.Chain(ctx, "resp_a", "k")
	wantNotFound(t, "Chain after Delete", err)
}

func ids(items []protocol.Item) []string {
	out := make([]string, len(items))
	for i := range items {
		out[i] = items[i].ID
	}
	return out
}

func testInputItems(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	ctx := context.Background()
	mustPut(t, s, response("r", "", "k", 5))
	id := func(i int) string { return fmt.Sprintf("msg_r_in%d", i) }
	cases := []struct {
		page store.Page
		want []string
		more bool
	}{
		{store.Page{Desc: true}, []string{id(4), id(3), id(2), id(1), id(0)}, false},
		{store.Page{Limit: 2}, []string{id(0), id(1)}, true},
		{store.Page{Limit: 2, After: id(1)}, []string{id(2), id(3)}, true},
		{store.Page{Limit: 2, After: id(3)}, []string{id(4)}, false},
		{store.Page{Desc: true, After: id(2)}, []string{id(1), id(0)}, false},
		{store.Page{After: id(4)}, []string{}, false},
	}
	for _, c := range cases {
		got, err := s.InputItems(ctx, "r", "k", c.page)
		if err != nil {
			t.Fatalf("%+v: %v", c.page, err)
		}
		if fmt.Sprint(ids(got.Items)) != fmt.Sprint(c.want) || got.HasMore != c.more {
			t.Errorf("%+v: %v has_more=%v, want %v %v", c.page, ids(got.Items), got.HasMore, c.want, c.more)
		}
	}
	if _, err := s.InputItems(ctx, "r", "k", store.Page{After: "msg_nope"}); !errors.Is(err, store.ErrCursorNotFound) {
		t.Errorf("unknown after: err = %v, want ErrCursorNotFound", err)
	}
	_, err := s.InputItems(ctx, "nope", "k", store.Page{})
	wantNotFound(t, "InputItems unknown", err)
}

// chainOf is the expected chain of public-shape responses, oldest first.
func chainOf(rs ...*store.Response) []protocol.Item {
	var items []protocol.Item
	for _, r := range rs {
		items = append(items, r.Input...)
		items = append(items, r.Response.Output...)
	}
	return items
}

func testChain(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	a, b, c := response("a", "", "k", 1), response("b", "a", "k", 2), response("c", "b", "k", 1)
	for _, r := range []*store.Response{a, b, c} {
		mustPut(t, s, r)
	}
	got, err := s.Chain(context.Background(), "c", "k")
	if err != nil {
		t.Fatal(err)
	}
	if want := chainOf(a, b, c); js(t, got) != js(t, want) {
		t.Fatalf("Chain(c) = %v\nwant %v", ids(got), ids(want))
	}
	got, err = s.Chain(context.Background(), "a", "k")
	if err != nil || js(t, got) != js(t, chainOf(a)) {
		t.Fatalf("Chain(a) = %v, %v", ids(got), err)
	}
}

func testChainAppendShape(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	x := response("x", "", "k", 1)
	x.Chain = append([]protocol.Item{msg("msg_hist", "user", "before")}, chainOf(x)...)
	y := response("y", "x", "k", 1)
	mustPut(t, s, x)
	mustPut(t, s, y)
	got, err := s.Chain(context.Background(), "y", "k")
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]protocol.Item(nil), x.Chain...), chainOf(y)...)
	if js(t, got) != js(t, want) {
		t.Fatalf("Chain(y) = %v\nwant %v", ids(got), ids(want))
	}
	got, err = s.Chain(context.Background(), "x", "k")
	if err != nil || js(t, got) != js(t, x.Chain) {
		t.Fatalf("Chain(x) = %v, %v; want its Chain %v", ids(got), err, ids(x.Chain))
	}
}

func testChainMissing(t *testing.T, f Factory) {
	s := open(t, f, 0, 0)
	ctx := context.Background()
	mustPut(t, s, response("b", "a", "k", 1)) // a was never stored
	_, err := s.Chain(ctx, "b", "k")
	wantNotFound(t, "Chain with a missing ancestor", err)
	mustPut(t, s, response("a", "", "other", 1))
	_, err = s.Chain(ctx, "b", "k")
	wantNotFound(t, "Chain with another owner's ancestor", err)
	_, err = s.Chain(ctx, "nope", "k")
	wantNotFound(t, "Chain unknown", err)
	if got := store.MissingID(err, "?"); got != "nope" {
		t.Fatalf("Chain unknown names %q, want nope", got)
	}
	// A chain whose middle response is gone names that response, not the one asked for.
	for _, r := range []*store.Response{response("m1", "", "k", 1), response("m2", "m1", "k", 1), response("m3", "m2", "k", 1)} {
		mustPut(t, s, r)
	}
	if err := s.Delete(ctx, "m2", "k"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Chain(ctx, "m3", "k")
	wantNotFound(t, "Chain with its middle response deleted", err)
	if got := store.MissingID(err, "m3"); got != "m2" {
		t.Fatalf("Chain(m3) with m2 deleted names %q, want m2", got)
	}
}

// withQuota returns s as store.KeyQuotas with the quotas set, or skips the test.
func withQuota(t *testing.T, s store.Store, count int, bytes int64) store.Store {
	t.Helper()
	q, ok := s.(store.KeyQuotas)
	if !ok {
		t.Skip("the store has no per-key quotas")
	}
	q.SetKeyQuota(count, bytes)
	return s
}

// quotaResponse is response(id) counted against quota.
func quotaResponse(id, quota string, n int) *store.Response {
	r := response(id, "", quota, n)
	r.Quota = quota
	return r
}

func testKeyQuotaCount(t *testing.T, f Factory) {
	s := withQuota(t, open(t, f, 100, 0), 3, 0)
	mustPut(t, s, quotaResponse("a", "A", 1))
	var kept []bool
	for i := range 10 {
		mustPut(t, s, quotaResponse(fmt.Sprint("b", i), "B", 1))
	}
	if !present(t, s, "a", "A") {
		t.Fatal("key A's response was evicted by key B's")
	}
	for i := range 10 {
		kept = append(kept, present(t, s, fmt.Sprint("b", i), "B"))
	}
	if got := fmt.Sprint(kept); got != "[false false false false false false false true true true]" {
		t.Fatalf("key B kept %s, want its last 3", got)
	}
	// Recency within a key: b7, used now, outlives b8.
	_ = present(t, s, "b7", "B")
	mustPut(t, s, quotaResponse("b10", "B", 1))
	if !present(t, s, "b7", "B") || present(t, s, "b8", "B") {
		t.Fatal("want b7 (used) kept and b8 (its key's least recently used) evicted")
	}
	// A deleted response no longer counts against its key.
	if err := s.Delete(context.Background(), "b7", "B"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, quotaResponse("b11", "B", 1))
	if !present(t, s, "b9", "B") || !present(t, s, "b10", "B") || !present(t, s, "b11", "B") {
		t.Fatal("a Delete still counted against the key's quota")
	}
}

func testKeyQuotaBytes(t *testing.T, f Factory) {
	one := store.Size(quotaResponse("b0", "B", 1))
	s := withQuota(t, open(t, f, 100, 0), 0, 2*one+one/2)
	mustPut(t, s, quotaResponse("a", "A", 1))
	for i := range 4 {
		mustPut(t, s, quotaResponse(fmt.Sprint("b", i), "B", 1))
	}
	if !present(t, s, "a", "A") || present(t, s, "b1", "B") || !present(t, s, "b2", "B") || !present(t, s, "b3", "B") {
		t.Fatal("want key A's response and key B's last two kept")
	}
	mustPut(t, s, quotaResponse("big", "B", 50)) // over the quota alone: kept, the key's others evicted
	if !present(t, s, "big", "B") || present(t, s, "b3", "B") || !present(t, s, "a", "A") {
		t.Fatal("want only key B's oversize newest response kept, and key A's")
	}
}

func testKeyQuotaConcurrent(t *testing.T, f Factory) {
	s := withQuota(t, open(t, f, 1000, 0), 5, 0)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if err := s.Put(ctx, quotaResponse(fmt.Sprintf("g%d_%d", g, i), "B", 1)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for g := range 8 {
		for i := range 10 {
			if present(t, s, fmt.Sprintf("g%d_%d", g, i), "B") {
				n++
			}
		}
	}
	if n != 5 {
		t.Fatalf("key B holds %d responses after concurrent Puts, want its quota of 5", n)
	}
}

func testEvictLRU(t *testing.T, f Factory) {
	s := open(t, f, 2, 0)
	mustPut(t, s, response("a", "", "k", 1))
	mustPut(t, s, response("b", "", "k", 1))
	if !present(t, s, "a", "k") { // a is now the most recently used
		t.Fatal("a missing")
	}
	mustPut(t, s, response("c", "", "k", 1))
	if !present(t, s, "a", "k") || present(t, s, "b", "k") || !present(t, s, "c", "k") {
		t.Fatal("want a and c kept, b (least recently used) evicted")
	}
	if _, err := s.Chain(context.Background(), "a", "k"); err != nil { // Chain counts as a use
		t.Fatal(err)
	}
	mustPut(t, s, response("d", "", "k", 1))
	if !present(t, s, "a", "k") || present(t, s, "c", "k") {
		t.Fatal("want a kept (used by Chain), c evicted")
	}
}

func testEvictBytes(t *testing.T, f Factory) {
	one := store.Size(response("a", "", "k", 1))
	s := open(t, f, 0, 2*one+one/2)
	for _, id := range []string{"a", "b", "c"} {
		mustPut(t, s, response(id, "", "k", 1))
	}
	if present(t, s, "a", "k") || !present(t, s, "b", "k") || !present(t, s, "c", "k") {
		t.Fatal("want a evicted by the byte bound, b and c kept")
	}
	big := response("big", "", "k", 50)
	mustPut(t, s, big) // larger than the bound alone: kept, everything else evicted
	if !present(t, s, "big", "k") || present(t, s, "c", "k") {
		t.Fatal("want only the oversize newest response kept")
	}
}

func testNonOwnerNoTouch(t *testing.T, f Factory) {
	s := open(t, f, 2, 0)
	ctx := context.Background()
	mustPut(t, s, response("a", "", "k", 1))
	mustPut(t, s, response("b", "", "k", 1))
	_, _ = s.Get(ctx, "a", "intruder")
	_, _ = s.Chain(ctx, "a", "intruder")
	_, _ = s.InputItems(ctx, "a", "intruder", store.Page{})
	mustPut(t, s, response("c", "", "k", 1))
	if present(t, s, "a", "k") || !present(t, s, "b", "k") {
		t.Fatal("a non-owner's lookups changed the eviction order")
	}
}

func testConcurrent(t *testing.T, f Factory) {
	s := open(t, f, 50, 0)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				id := fmt.Sprintf("g%d_%d", g, i)
				parent := ""
				if i > 0 {
					parent = fmt.Sprintf("g%d_%d", g, i-1)
				}
				if err := s.Put(ctx, response(id, parent, "k", 1)); err != nil {
					errs <- err
					return
				}
				if _, err := s.Chain(ctx, id, "k"); err != nil && !errors.Is(err, store.ErrNotFound) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
