package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	cp, err := DecodeCreateParams([]byte(b.String()))
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
	if _, err := DecodeCreateParams([]byte(bad)); err == nil || err.Param != fmt.Sprintf("input[%d].content", n-2) {
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
	var held []func()
	for range cap(heavySlots) {
		held = append(held, CPUSlot(HeavyBytes))
	}
	CPUSlot(HeavyBytes - 1)() // small work takes no slot: it would block here otherwise
	got := make(chan struct{})
	go func() {
		CPUSlot(HeavyBytes)()
		close(got)
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
