package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// TestDecodeLongInputInOrder: an input longer than one chunk of arrayOf is decoded whole and
// in order, including an error in the last chunk, which names the element's index.
func TestDecodeLongInputInOrder(t *testing.T) {
	const n = 3*arrayChunk + 7
	var b strings.Builder
	b.WriteString(`{"model":"m","input":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":"user","content":"m%d"}`, i)
	}
	b.WriteString(`]}`)
	cp, err := DecodeCreateParams(context.Background(), []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Input) != n {
		t.Fatalf("%d items, want %d", len(cp.Input), n)
	}
	for i, it := range cp.Input {
		if got := it.Content[0].Text; got != fmt.Sprintf("m%d", i) {
			t.Fatalf("input[%d] = %q", i, got)
		}
	}
	bad := strings.Replace(b.String(), fmt.Sprintf(`"m%d"`, n-2), `5`, 1)
	if _, err := DecodeCreateParams(context.Background(), []byte(bad)); err == nil || err.Param != fmt.Sprintf("input[%d].content", n-2) {
		t.Fatalf("error %+v, want one at input[%d].content", err, n-2)
	}
}

// TestAppendItemsLong: AppendItems of more than one chunk gives what append gives.
func TestAppendItemsLong(t *testing.T) {
	src := make([]Item, 2*arrayChunk+3)
	for i := range src {
		src[i].ID = fmt.Sprint(i)
	}
	dst := []Item{{ID: "first"}}
	got := AppendItems(dst, src)
	if len(got) != len(src)+1 || got[0].ID != "first" {
		t.Fatalf("len %d, first %q", len(got), got[0].ID)
	}
	for i := range src {
		if got[i+1].ID != src[i].ID {
			t.Fatalf("item %d = %q", i+1, got[i+1].ID)
		}
	}
}

// TestCPUSlot: below HeavyBytes CPUSlot never waits; at HeavyBytes it waits while every slot
// is taken and goes on when one is given back.
func TestCPUSlot(t *testing.T) {
	ctx := t.Context()
	held := holdSlots(t)
	mustSlot(t, ctx, HeavyBytes-1)() // small work takes no slot: it would block here otherwise
	got := make(chan struct{})
	go func() {
		defer close(got)
		release, err := CPUSlot(ctx, HeavyBytes)
		if err != nil {
			t.Error(err)
		}
		release()
	}()
	select {
	case <-got:
		t.Fatal("a heavy decode ran while every slot was taken")
	default:
	}
	held[0]()
	<-got
	for _, release := range held[1:] {
		release()
	}
	if len(heavySlots) != 0 {
		t.Fatalf("%d slots still taken", len(heavySlots))
	}
}

// TestCPUSlotContext: a caller waiting for a slot leaves the queue as soon as its context
// ends, with the context's error and without a slot (every slot is still held by others when
// it returns); a context already ended gets no slot even when one is free; the waits are
// counted, the abandoned ones apart.
func TestCPUSlotContext(t *testing.T) {
	before := SlotWaits()
	held := holdSlots(t)
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		release func()
		err     error
	}
	got := make(chan result)
	go func() {
		release, err := CPUSlot(ctx, HeavyBytes)
		got <- result{release, err}
	}()
	for SlotWaits().Waiting != before.Waiting+1 { // it is queued behind the held slots
		runtime.Gosched()
	}
	cancel()
	r := <-got
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", r.err)
	}
	r.release() // a no-op: it must not give back a slot it never took
	if len(heavySlots) != cap(heavySlots) {
		t.Fatalf("%d of %d slots taken after an abandoned wait", len(heavySlots), cap(heavySlots))
	}
	for _, release := range held {
		release()
	}
	if _, err := CPUSlot(ctx, HeavyBytes); !errors.Is(err, context.Canceled) || len(heavySlots) != 0 {
		t.Fatalf("ended context: err %v, %d slots taken", err, len(heavySlots))
	}
	after := SlotWaits()
	if n := after.Abandoned - before.Abandoned; n != 2 {
		t.Fatalf("%d abandoned waits counted, want 2", n)
	}
	// The held slots were free (waits of 0 s), the two abandoned waits ended unserved.
	if n := after.Count - before.Count; n != int64(len(held))+2 {
		t.Fatalf("%d waits counted, want %d", n, len(held)+2)
	}
	if after.Waiting != before.Waiting {
		t.Fatalf("%d callers still counted as waiting", after.Waiting-before.Waiting)
	}
	last := len(after.Cumulative) - 1
	if after.Cumulative[last] > after.Count || after.Cumulative[0] < before.Cumulative[0]+int64(len(held)) {
		t.Fatalf("buckets %v of %d waits", after.Cumulative, after.Count)
	}
}

// TestDecodeAbandoned: a large body whose request context ends while it waits for a slot is
// not decoded: the decoders answer client_closed_request (499) and take no slot.
func TestDecodeAbandoned(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	body := []byte(`{"model":"m","input":"` + strings.Repeat("x", HeavyBytes) + `"}`)
	if _, err := DecodeCreateParams(ctx, body); err == nil || err.Code != CodeClientClosed || err.Status != StatusClientClosed {
		t.Fatalf("DecodeCreateParams: %v", err)
	}
	frame := []byte(`{"type":"response.create",` + string(body[1:]))
	if _, err := DecodeClientEvent(ctx, frame); !IsClientClosed(err) {
		t.Fatalf("DecodeClientEvent: %v", err)
	}
	if _, err := DecodeSteer(ctx, frame); !IsClientClosed(err) {
		t.Fatalf("DecodeSteer: %v", err)
	}
	if len(heavySlots) != 0 {
		t.Fatalf("%d slots taken", len(heavySlots))
	}
	if _, err := DecodeCreateParams(t.Context(), body); err != nil {
		t.Fatalf("with a live context: %v", err)
	}
}

// holdSlots takes every heavy-work slot (each was free) and returns their releases.
func holdSlots(t *testing.T) []func() {
	t.Helper()
	var held []func()
	for range cap(heavySlots) {
		held = append(held, mustSlot(t, t.Context(), HeavyBytes))
	}
	return held
}

func mustSlot(t *testing.T, ctx context.Context, n int) func() {
	t.Helper()
	release, err := CPUSlot(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// TestReadAll: ReadAll returns what io.ReadAll returns, for texts shorter than a piece, of
// several pieces, and read one byte at a time, and passes a read error on.
func TestReadAll(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 3*readPiece + 17} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(i % 251)
		}
		got, err := ReadAll(bytes.NewReader(want))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: got %d bytes, err %v", n, len(got), err)
		}
		if n < 5000 {
			got, err = ReadAll(iotest.OneByteReader(bytes.NewReader(want)))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%d bytes one at a time: got %d bytes, err %v", n, len(got), err)
			}
		}
	}
	boom := errors.New("boom")
	got, err := ReadAll(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || string(got) != "abc" {
		t.Fatalf("got %q, %v; want \"abc\", boom", got, err)
	}
}

// TestLargeStringsAndGrowth: bigString is string(b) for texts of one piece and many, and
// growYielding keeps dst's bytes and makes the room asked for.
func TestLargeStringsAndGrowth(t *testing.T) {
	for _, n := range []int{0, 10, HeavyBytes - 1, HeavyBytes, 3*appendRun*5 + 3} {
		b := bytes.Repeat([]byte("xyz"), n/3+1)[:n]
		if got := bigString(b); got != string(b) {
			t.Fatalf("%d bytes: bigString differs", n)
		}
		dst := append(make([]byte, 0, 8), "head"...)
		g := growYielding(append(dst, b...), 5*appendRun)
		if cap(g)-len(g) < 5*appendRun || !bytes.Equal(g, append([]byte("head"), b...)) {
			t.Fatalf("%d bytes: growYielding gave len %d cap %d", n, len(g), cap(g))
		}
	}
}

// TestAppendYieldingBytes: appendYieldingBytes is append for short and long texts.
func TestAppendYieldingBytes(t *testing.T) {
	for _, n := range []int{0, 5, HeavyBytes + appendRun + 1} {
		b := bytes.Repeat([]byte{'q'}, n)
		if got := appendYieldingBytes([]byte("ab"), b); !bytes.Equal(got, append([]byte("ab"), b...)) {
			t.Fatalf("%d bytes: differs", n)
		}
	}
}
