package sim

import (
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// A chunk is encoded in segments: pieces of text between cut points where the tokenizer's
// split pattern is certain to end one match and start the next, whatever surrounds them. The
// pattern has no lookbehind, and its only lookahead (`\s+(?!\S)`) reads past a whitespace run,
// so a segment that does not end in a space-or-tab run encodes alone to the tokens it has inside
// the chunk. The tokens of a chunk are therefore the concatenation of its segments' tokens, and
// a segment's tokens can be kept by its text: "handler", " request", ".go", ":" recur in tool
// output and in the sim's own arguments, and a kept segment costs a map lookup instead of the
// tokenizer's regular expression and its garbage (a match object per piece).
//
// The cut points are between two ASCII bytes a, b where no alternative of the pattern can match
// both:
//
//	a letter, b not a letter nor '   a letter run (with an optional leading character and a
//	                                   contraction suffix 's, 't, …) holds only letters, marks
//	                                   and the contraction's apostrophe
//	a digit, b not a digit             \p{N}{1,3} holds only digits; no other alternative takes one
//	a '\n', b printable, not space     a newline ends a whitespace match or the [\r\n/]* tail of
//	         nor '/'                   a punctuation match
//	a punctuation, b a digit           a punctuation match holds no digit, and a letter match
//	                                   starts with at most one such character and then letters
//
// Texts that are not valid UTF-8 are encoded in one piece as before (the tokenizer reads them
// as runes, and its pieces then differ from the bytes). FuzzSegments checks the whole against
// encoding the chunk in one piece.

// token is an o200k_base token: its id (below 1<<24; o200k_base's are below 1<<18) in the low 24
// bits, the length in bytes of its text (at most 128 in o200k_base) in the top 8.
type token uint32

func (t token) id() uint32 { return uint32(t) & (1<<24 - 1) }
func (t token) size() int  { return int(t >> 24) }

// packToken returns the token of id with a text of size bytes, and whether both fit.
func packToken(id uint, size int) (token, bool) {
	return token(uint32(id)&(1<<24-1) | uint32(min(size, 255))<<24), id < 1<<24 && size <= 255
}

// The segment cache is a table of segmentSlots slots, shared by every rollout: a segment's hash
// picks two slots, where it is looked for and kept (keeping it replaces what the slot held). A slot
// is one 64-byte cache line that holds the segment's text and tokens itself, so a lookup reads
// one line of the table, two when the segment is in its second slot or not kept (and the text it
// compares, which the caller has just scanned), instead of following pointers to a segment, its
// text and its tokens, each a likely cache miss when other work has run since. The table holds
// no pointers, so the garbage collector never reads it.
// Its memory is fixed: segmentSlots × 64 bytes = 4 MiB, allocated when the package is
// initialised (the pages are the operating system's until a slot is first written).
// Segments longer than maxSegmentLen bytes or of more than maxSegmentTokens tokens are not kept
// (in tool output and prose, nearly every segment is a word, a number or a punctuation of one to
// three tokens).
const (
	segmentSlots     = 1 << 16
	maxSegmentLen    = 32
	maxSegmentTokens = 6
)

// segmentSlot is a slot of the segment table. Every word is read and written atomically, and
// the head's sequence number makes a slot a seqlock: a writer makes the number odd (by
// compare-and-swap, so writers exclude each other; a writer that finds the slot busy keeps
// nothing), writes the text and tokens, then stores the next even number with the new length. A
// reader takes the slot's content only if it read the same even head before and after it, so
// a read torn by a concurrent writer is a miss, never another segment's tokens.
type segmentSlot struct {
	// head: the sequence number in bits 32-63, the number of tokens in bits 8-15, the length of
	// the text in bytes in bits 0-7 (0: the slot is empty).
	head atomic.Uint64
	text [maxSegmentLen / 8]atomic.Uint64    // the text, 8 bytes a word, little-endian, zero-padded
	toks [maxSegmentTokens / 2]atomic.Uint64 // the tokens, two a word, the first in the low half
}

const slotWriting = 1 << 32 // the low bit of the head's sequence number: a writer is filling the slot

var (
	// segmentTable is a large allocation, so it starts on a page and each slot is one cache line.
	segmentTable = make([]segmentSlot, segmentSlots)
	segmentSeed  = rand.Uint64()
)

// slotsOf returns the indexes in segmentTable of seg's two slots (they may be the same), for a
// seg of at most maxSegmentLen bytes. The hash mixes the words of seg's text with a random seed
// per process (the splitmix64 finaliser); it is cheaper than hash/maphash's call for these short
// texts, and a text crafted to collide costs only cache misses.
func slotsOf(seg string) (first, second uint32) {
	h := segmentSeed ^ uint64(len(seg))
	for i := range (len(seg) + 7) / 8 {
		h = mix64(h ^ textWord(seg, i))
	}
	return uint32(h & (segmentSlots - 1)), uint32(h >> 32 & (segmentSlots - 1))
}

// mix64 is splitmix64's finaliser: every bit of the result depends on every bit of z.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// textWord returns bytes 8i to 8i+7 of s as a little-endian word, zero-padded past the end of s.
func textWord(s string, i int) uint64 {
	s = s[8*i:]
	if len(s) >= 8 {
		return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	}
	var w uint64
	for j := len(s) - 1; j >= 0; j-- {
		w = w<<8 | uint64(s[j])
	}
	return w
}

// lookupSegment returns the kept tokens of seg, in buf, and whether seg was kept.
func lookupSegment(seg string, buf *[maxSegmentTokens]token) ([]token, bool) {
	if len(seg) > maxSegmentLen {
		return nil, false
	}
	first, second := slotsOf(seg)
	return lookupSlots(first, segmentTable[first].head.Load(), second, seg, buf)
}

// lookupSlots is lookupSegment given seg's slots and a head h read from the first.
func lookupSlots(first uint32, h uint64, second uint32, seg string, buf *[maxSegmentTokens]token) ([]token, bool) {
	if toks, ok := lookupSlot(&segmentTable[first], h, seg, buf); ok || first == second {
		return toks, ok
	}
	s := &segmentTable[second]
	return lookupSlot(s, s.head.Load(), seg, buf)
}

// lookupSlot is lookupSegment given seg's slot s and a head h read from it.
func lookupSlot(s *segmentSlot, h uint64, seg string, buf *[maxSegmentTokens]token) ([]token, bool) {
	if int(h&0xff) != len(seg) || len(seg) == 0 || len(seg) > maxSegmentLen || h&slotWriting != 0 {
		return nil, false
	}
	for i := range (len(seg) + 7) / 8 {
		if s.text[i].Load() != textWord(seg, i) {
			return nil, false
		}
	}
	n := int(h >> 8 & 0xff)
	if n > maxSegmentTokens {
		return nil, false
	}
	for i := 0; i < n; i += 2 {
		w := s.toks[i/2].Load()
		buf[i] = token(w)
		if i+1 < n {
			buf[i+1] = token(w >> 32)
		}
	}
	if s.head.Load() != h {
		return nil, false // a writer changed the slot since h was read
	}
	return buf[:n], true
}

// keepSegment keeps toks as the tokens of seg, unless seg is too long, has too many tokens, or
// the slot it picks is being written by another goroutine at that moment. It picks an empty slot
// of seg's two, else one of them by the first's sequence number, which changes at each write: two
// segments that share one slot then find room in their other slots rather than replacing each
// other at every turn.
func keepSegment(seg string, toks []token) {
	if len(seg) > maxSegmentLen || len(seg) == 0 || len(toks) > maxSegmentTokens {
		return
	}
	first, second := slotsOf(seg)
	s := &segmentTable[first]
	h := s.head.Load()
	if h2 := segmentTable[second].head.Load(); h&0xff != 0 && (h2&0xff == 0 || h&(2*slotWriting) != 0) {
		s, h = &segmentTable[second], h2
	}
	fillSlot(s, h, seg, toks)
}

// fillSlot writes seg and toks into slot s, whose head was h, unless s is being written or has
// been written since h was read.
func fillSlot(s *segmentSlot, h uint64, seg string, toks []token) {
	if h&slotWriting != 0 || !s.head.CompareAndSwap(h, h+slotWriting) {
		return
	}
	for i := range s.text {
		var w uint64
		if 8*i < len(seg) {
			w = textWord(seg, i)
		}
		s.text[i].Store(w)
	}
	for i := range s.toks {
		var w uint64
		if 2*i < len(toks) {
			w = uint64(toks[2*i])
		}
		if 2*i+1 < len(toks) {
			w |= uint64(toks[2*i+1]) << 32
		}
		s.toks[i].Store(w)
	}
	s.head.Store((h+2*slotWriting)&^(slotWriting-1) | uint64(len(toks))<<8 | uint64(len(seg)))
}

// segmentEnd returns the end of the segment of chunk that starts at from: the next cut point
// after from, or len(chunk).
func segmentEnd(chunk string, from int) int {
	for i := from + 1; i < len(chunk); i++ {
		if cutBetween(chunk[i-1], chunk[i]) {
			return i
		}
	}
	return len(chunk)
}

// cutBetween reports whether the split pattern always ends a match between bytes a and b (see
// the comment at the top of this file).
func cutBetween(a, b byte) bool {
	if b >= utf8.RuneSelf {
		return false
	}
	switch {
	case isASCIILetter(a):
		return !isASCIILetter(b) && b != '\''
	case '0' <= a && a <= '9':
		return b < '0' || b > '9'
	case a == '\n':
		return '!' <= b && b <= '~' && b != '/'
	case '!' <= a && a <= '~':
		return '0' <= b && b <= '9'
	}
	return false
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// segmentBatch is how many segments encodeChunk cuts before it looks them up.
const segmentBatch = 16

// encodeChunk calls yield with each token of chunk, in order, until yield returns false, and
// reports whether it did not. Kept segments come from the cache; each run of segments that are
// not is encoded by the tokenizer in one call and its segments are kept.
//
// The segments are looked up segmentBatch at a time: their slots are found first, then the
// heads of their first slots are read in a loop that does nothing else, so that the CPU waits for
// their cache misses together rather than one after the other.
func encodeChunk(chunk string, yield func(token) bool) bool {
	if !utf8.ValidString(chunk) {
		return encodeWhole(chunk, yield)
	}
	var (
		buf     [maxSegmentTokens]token
		ends    [segmentBatch]int
		firsts  [segmentBatch]uint32
		seconds [segmentBatch]uint32
		heads   [segmentBatch]uint64
	)
	miss := -1 // start of the run of segments not in the cache
	for pos := 0; pos < len(chunk); {
		n := 0
		for from := pos; n < segmentBatch && from < len(chunk); n++ {
			ends[n] = segmentEnd(chunk, from)
			if ends[n]-from <= maxSegmentLen {
				firsts[n], seconds[n] = slotsOf(chunk[from:ends[n]])
			} else {
				firsts[n], seconds[n] = 0, 0 // not kept: any slot's head tells so
			}
			from = ends[n]
		}
		for i := range n {
			heads[i] = segmentTable[firsts[i]].head.Load()
		}
		for i := range n {
			end := ends[i]
			if toks, ok := lookupSlots(firsts[i], heads[i], seconds[i], chunk[pos:end], &buf); ok {
				if miss >= 0 {
					if !encodeRun(chunk[miss:pos], yield) {
						return false
					}
					miss = -1
				}
				for _, t := range toks {
					if !yield(t) {
						return false
					}
				}
			} else if miss < 0 {
				miss = pos
			}
			pos = end
		}
	}
	if miss >= 0 {
		return encodeRun(chunk[miss:], yield)
	}
	return true
}

// encodeRun encodes run, whose ends are cut points, in one tokenizer call, keeps its segments'
// tokens and yields them. Nothing is kept unless the tokens' texts are run, in order: the
// tokenizer drops some characters (DEL), and then a token's place in run is unknown.
func encodeRun(run string, yield func(token) bool) bool {
	ids, pieces, _ := codec().Encode(run)
	toks := make([]token, len(ids))
	kept := true
	pos := 0
	for i, p := range pieces {
		t, ok := packToken(ids[i], len(p))
		toks[i] = t
		kept = kept && ok && strings.HasPrefix(run[pos:], p)
		if kept {
			pos += len(p)
		}
	}
	if kept && pos == len(run) {
		// The segment run[seg:segEnd] starts at token first; end is where token i ends.
		seg, segEnd, first, end := 0, segmentEnd(run, 0), 0, 0
		for i, t := range toks {
			end += t.size()
			if end == segEnd {
				keepSegment(run[seg:segEnd], toks[first:i+1])
				seg, first = segEnd, i+1
				segEnd = segmentEnd(run, seg)
			} else if end > segEnd {
				break // a token across a cut point: the cut is not certain (FuzzSegments)
			}
		}
	}
	for _, t := range toks {
		if !yield(t) {
			return false
		}
	}
	return true
}

// encodeWhole encodes chunk in one tokenizer call and keeps nothing.
func encodeWhole(chunk string, yield func(token) bool) bool {
	ids, pieces, _ := codec().Encode(chunk)
	for i, id := range ids {
		t, _ := packToken(id, len(pieces[i]))
		if !yield(t) {
			return false
		}
	}
	return true
}
