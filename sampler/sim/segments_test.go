package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"
	"unsafe"
)

// encodePieces calls fn with the id and the length in bytes of each token of s, in order (a
// token may hold part of a multi-byte character; the lengths sum to len(s) unless the tokenizer
// drops a character: it drops DEL), until fn returns false. The ids are those appendEncoded
// appends for s. The tests' reference for the stream's tokens and for the bytes a number of
// tokens takes; the sim itself streams (stream.go) or appends ids (appendEncoded).
func encodePieces(s string, fn func(id uint32, n int) bool) {
	encodeChunksUntil(s, func(chunk string) bool {
		return encodeChunk(chunk, func(t token) bool { return fn(t.id(), t.size()) })
	})
}

// referencePieces returns each token of s as the tokenizer gives it for each chunk in one call:
// ids and the lengths of their texts.
func referencePieces(s string) (ids []uint32, sizes []int) {
	encodeChunks(s, func(chunk string) {
		got, pieces, _ := codec().Encode(chunk)
		for i, id := range got {
			ids = append(ids, uint32(id))
			sizes = append(sizes, len(pieces[i]))
		}
	})
	return ids, sizes
}

// checkSegments checks that s encodes, through the segment cache in whatever state it is, to the
// tokenizer's tokens for whole chunks, and that every cut point of a chunk is a token boundary.
func checkSegments(t *testing.T, s string) {
	t.Helper()
	wantIDs, wantSizes := referencePieces(s)
	if got := appendEncoded(nil, s); !slices.Equal(got, wantIDs) {
		t.Fatalf("%q: tokens %v, the tokenizer gives %v", s, got, wantIDs)
	}
	if n := countTokens(s); n != len(wantIDs) {
		t.Fatalf("%q: countTokens %d, want %d", s, n, len(wantIDs))
	}
	var ids []uint32
	var sizes []int
	encodePieces(s, func(id uint32, n int) bool { ids, sizes = append(ids, id), append(sizes, n); return true })
	if !slices.Equal(ids, wantIDs) || !slices.Equal(sizes, wantSizes) {
		t.Fatalf("%q: pieces %v %v, the tokenizer gives %v %v", s, ids, sizes, wantIDs, wantSizes)
	}
	if !utf8.ValidString(s) || len(s) > 8192 {
		return
	}
	// What the cache relies on, checked directly: a chunk cut at a cut point encodes to the
	// chunk's tokens. (The tokenizer drops some characters, DEL among them, so token lengths do
	// not locate the cut points.)
	encodeChunks(s, func(chunk string) {
		whole, _, _ := codec().Encode(chunk)
		checked := 0
		for i := 1; i < len(chunk) && checked < 16; i++ {
			if !cutBetween(chunk[i-1], chunk[i]) {
				continue
			}
			checked++
			left, _, _ := codec().Encode(chunk[:i])
			right, _, _ := codec().Encode(chunk[i:])
			if !slices.Equal(append(left, right...), whole) {
				t.Fatalf("%q: cut point %d (%q|%q) changes the tokens", chunk, i, chunk[:i], chunk[i:])
			}
		}
	})
}

var segmentTexts = []string{
	"hello world", "It's DON'T we'll they'd I'M you're", "abc123def4567 89x", "12345678901",
	"internal/server/file_12.go:345: handler request response\nsession/file_9.go:1: ok\n",
	"a\n/b\n\n/c\r\nd\n\te\n  f\n", "x.\n/y", "naïve café über straße", "a\u0300b\u0301 c\u0302",
	"日本語のテキスト and English", "emoji 🎉🎉 party!!", "tabs\tand\u00a0nbsp\u2003em space",
	"\v\f\x1c\x1d\x1e\x1f\x85 odd spaces", "CamelCaseWords HTTPServer getHTTPResponse",
	`{"cmd":"echo tether-call-12"}`, `{"q":"naïveté","n":1}`, "$ echo tether-call-7\ntether-call-7\n",
	"   leading spaces\n\n\n   trailing   ", "x''s 's 'S ''", "ǅungla ǈ Ǉ ǋ", "ʰʲ modifier ʷletters",
	"1,234.56 -7e10 0x1F", "a-b_c.d/e\\f:g;h!i?j", "\n\n\nx\n\n\n", "\r\rx\r", "word\n123\n!x\n", "\x7fA00 del\x7f\x7fdel\n\x7f",
}

// clearSegments empties the segment cache.
func clearSegments() {
	for i := range segmentTable {
		s := &segmentTable[i]
		s.head.Store(0)
		for j := range s.text {
			s.text[j].Store(0)
		}
		for j := range s.toks {
			s.toks[j].Store(0)
		}
	}
}

func TestSegmentsEncodeAsChunks(t *testing.T) {
	clearSegments()
	for _, s := range segmentTexts {
		checkSegments(t, s) // cold for its new segments
	}
	for _, s := range segmentTexts {
		checkSegments(t, s) // warm
	}
	// The segments of one text in the company of the others.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			s := segmentTexts[rng.IntN(len(segmentTexts))]
			i, j := rng.IntN(len(s)+1), rng.IntN(len(s)+1)
			b.WriteString(s[min(i, j):max(i, j)])
		}
		checkSegments(t, b.String())
	}
	checkSegments(t, commandOutput(8192, 1))
}

// segmentTokens returns the tokens kept for segment i of the churn tests: 1 to maxSegmentTokens
// tokens, all different from those of any other segment.
func segmentTokens(i int) []token {
	toks := make([]token, 1+i%maxSegmentTokens)
	for j := range toks {
		toks[j] = token(i*maxSegmentTokens + j)
	}
	return toks
}

// TestSegmentCacheChurn keeps more distinct segments than the cache has slots: a lookup gives
// the tokens kept for that very text or a miss, never another segment's, and most slots are used.
func TestSegmentCacheChurn(t *testing.T) {
	defer clearSegments()
	clearSegments()
	if size, addr := unsafe.Sizeof(segmentSlot{}), uintptr(unsafe.Pointer(&segmentTable[0])); size != 64 || addr%64 != 0 {
		t.Fatalf("a slot is %d bytes at %#x: not one cache line", size, addr)
	}
	const n = segmentSlots + segmentSlots/2
	// Texts of every length up to maxSegmentLen, many sharing their first bytes.
	text := func(i int) string {
		s := strconv.Itoa(i) + "w"
		return s + strings.Repeat("x", i%(maxSegmentLen+1-len(s)))
	}
	for i := range n {
		keepSegment(text(i), segmentTokens(i))
	}
	hits := 0
	var buf [maxSegmentTokens]token
	for i := range n {
		toks, ok := lookupSegment(text(i), &buf)
		if ok && !slices.Equal(toks, segmentTokens(i)) {
			t.Fatalf("segment %q: tokens %v, kept %v", text(i), toks, segmentTokens(i))
		}
		if ok {
			hits++
		}
	}
	if hits < segmentSlots/2 || hits > segmentSlots {
		t.Fatalf("%d of %d segments kept in %d slots", hits, n, segmentSlots)
	}
	// A prefix, an extension or another text of the same length is not a kept segment.
	keepSegment("abcdefghij", []token{1, 2})
	for _, s := range []string{"abcdefghi", "abcdefghij\x00", "abcdefghiJ", "", strings.Repeat("x", maxSegmentLen+1)} {
		if toks, ok := lookupSegment(s, &buf); ok {
			t.Fatalf("%q found, tokens %v", s, toks)
		}
	}
	if toks, ok := lookupSegment("abcdefghij", &buf); !ok || !slices.Equal(toks, []token{1, 2}) {
		t.Fatalf("abcdefghij: %v %v", toks, ok)
	}
	long, many := strings.Repeat("y", maxSegmentLen+1), make([]token, maxSegmentTokens+1)
	keepSegment(long, []token{1})
	keepSegment("many", many)
	for _, s := range []string{long, "many"} {
		if _, ok := lookupSegment(s, &buf); ok {
			t.Fatalf("%q was kept (longer than maxSegmentLen or more than maxSegmentTokens tokens)", s)
		}
	}
	full := strings.Repeat("z", maxSegmentLen)
	keepSegment(full, segmentTokens(maxSegmentTokens-1))
	if toks, ok := lookupSegment(full, &buf); !ok || !slices.Equal(toks, segmentTokens(maxSegmentTokens-1)) {
		t.Fatalf("a segment of maxSegmentLen bytes and maxSegmentTokens tokens: %v %v", toks, ok)
	}
}

// TestSegmentSlotsShared keeps two segments whose first slots are the same: both stay kept.
func TestSegmentSlotsShared(t *testing.T) {
	defer clearSegments()
	clearSegments()
	seen := map[uint32]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		s := "w" + strconv.Itoa(i)
		first, second := slotsOf(s)
		if o, ok := seen[first]; ok && first != second {
			a, b = o, s
		}
		seen[first] = s
	}
	keepSegment(a, []token{1})
	keepSegment(b, []token{2, 3})
	var buf [maxSegmentTokens]token
	if toks, ok := lookupSegment(a, &buf); !ok || !slices.Equal(toks, []token{1}) {
		t.Fatalf("%q: %v %v", a, toks, ok)
	}
	if toks, ok := lookupSegment(b, &buf); !ok || !slices.Equal(toks, []token{2, 3}) {
		t.Fatalf("%q: %v %v", b, toks, ok)
	}
}

// TestSegmentSlotTornReads has goroutines keep and look up, in one slot, segments of the same
// length whose tokens depend on their text: a lookup gives the tokens kept for its text or a
// miss, never a mix of two writes. Run with -race.
func TestSegmentSlotTornReads(t *testing.T) {
	defer clearSegments()
	clearSegments()
	// Texts of the same length in one slot, so that only the seqlock tells them apart while a
	// writer replaces one by another.
	slot := &segmentTable[0]
	texts := []string{"seg00000001", "seg00000002", "seg00000003", "seg00000004"}
	tokensOf := func(k int) []token { return segmentTokens(k*maxSegmentTokens + maxSegmentTokens - 1) }
	var wg sync.WaitGroup
	var hits atomic.Int64
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Go(func() {
			var buf [maxSegmentTokens]token
			for i := range 100_000 {
				k := (i/4 + g) % len(texts)
				if i%4 == 0 { // one step in four writes, the others read
					fillSlot(slot, slot.head.Load(), texts[k], tokensOf(k))
					continue
				}
				toks, ok := lookupSlot(slot, slot.head.Load(), texts[k], &buf)
				if !ok {
					continue
				}
				hits.Add(1)
				if !slices.Equal(toks, tokensOf(k)) {
					errs <- fmt.Sprintf("%q: tokens %v, kept %v", texts[k], toks, tokensOf(k))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if hits.Load() == 0 {
		t.Fatal("no lookup found a kept segment")
	}
	t.Logf("%d of 300000 lookups found the segment", hits.Load())
}

// TestSegmentsConcurrent encodes texts that share segments from several goroutines at once
// (rollouts share the cache): every result is the tokenizer's. Run with -race.
func TestSegmentsConcurrent(t *testing.T) {
	clearSegments()
	texts := make([]string, 8)
	want := make([][]uint32, len(texts))
	for i := range texts {
		texts[i] = commandOutput(1500, uint64(i%3))
		want[i], _ = referencePieces(texts[i])
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(texts))
	for i := range texts {
		wg.Go(func() {
			for range 5 {
				if got := appendEncoded(nil, texts[i]); !slices.Equal(got, want[i]) {
					errs <- fmt.Sprintf("text %d: tokens differ from the tokenizer's", i)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// FuzzSegments checks the segment cache against the tokenizer: the cache's state carries over
// between inputs, so a segment kept from one text is reused in others.
func FuzzSegments(f *testing.F) {
	for _, s := range segmentTexts {
		f.Add(s)
	}
	f.Add("\xff\xfe broken utf8 and words")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			t.Skip()
		}
		checkSegments(t, s)
	})
}
