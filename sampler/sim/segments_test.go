package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

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
		segmentTable[i].Store(nil)
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

// TestSegmentCacheChurn keeps more distinct segments than the cache has slots: a lookup gives
// the tokens kept for that very text or a miss, never another segment's, and most slots are used.
func TestSegmentCacheChurn(t *testing.T) {
	defer clearSegments()
	clearSegments()
	const n = segmentSlots + segmentSlots/2
	text := func(i int) string { return "w" + strconv.Itoa(i) }
	for i := range n {
		keepSegment(text(i), []token{token(i)})
	}
	hits := 0
	for i := range n {
		toks, ok := lookupSegment(text(i))
		if ok && (len(toks) != 1 || toks[0] != token(i)) {
			t.Fatalf("segment %q: tokens %v of another segment", text(i), toks)
		}
		if ok {
			hits++
		}
	}
	if hits < segmentSlots/2 || hits > segmentSlots {
		t.Fatalf("%d of %d segments kept in %d slots", hits, n, segmentSlots)
	}
	if _, ok := lookupSegment(strings.Repeat("x", maxSegmentLen+1)); ok {
		t.Fatal("a segment longer than maxSegmentLen was found")
	}
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
