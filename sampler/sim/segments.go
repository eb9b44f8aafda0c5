package sim

import (
	"hash/maphash"
	"slices"
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

// The segment cache is a direct-mapped table of segmentSlots entries, shared by every
// rollout: a segment's slot is picked by its hash, and keeping a segment replaces what its slot
// held. Reads take no lock and write no memory; the table's size bounds its memory (512 KiB of
// slots, and at most segmentSlots entries of at most maxSegmentLen bytes and their tokens: about
// 5 MiB when the segments are words, 14 MiB at worst).
// Segments longer than maxSegmentLen bytes are not kept.
const (
	segmentSlots  = 1 << 16
	maxSegmentLen = 32
)

// segment is a kept segment: its text and its tokens.
type segment struct {
	text string
	toks []token
}

var (
	segmentTable [segmentSlots]atomic.Pointer[segment]
	segmentSeed  = maphash.MakeSeed()
)

func segmentSlot(seg string) *atomic.Pointer[segment] {
	return &segmentTable[maphash.String(segmentSeed, seg)&(segmentSlots-1)]
}

func lookupSegment(seg string) ([]token, bool) {
	if len(seg) > maxSegmentLen {
		return nil, false
	}
	if e := segmentSlot(seg).Load(); e != nil && e.text == seg {
		return e.toks, true
	}
	return nil, false
}

func keepSegment(seg string, toks []token) {
	if len(seg) > maxSegmentLen {
		return
	}
	// Copies: a kept segment must not hold on to the text it was cut from nor to the tokens of
	// the rest of its run.
	segmentSlot(seg).Store(&segment{text: strings.Clone(seg), toks: slices.Clone(toks)})
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

// encodeChunk calls yield with each token of chunk, in order, until yield returns false, and
// reports whether it did not. Kept segments come from the cache; each run of segments that are
// not is encoded by the tokenizer in one call and its segments are kept.
func encodeChunk(chunk string, yield func(token) bool) bool {
	if !utf8.ValidString(chunk) {
		return encodeWhole(chunk, yield)
	}
	miss := -1 // start of the run of segments not in the cache
	for pos := 0; pos < len(chunk); {
		end := segmentEnd(chunk, pos)
		if toks, ok := lookupSegment(chunk[pos:end]); ok {
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
