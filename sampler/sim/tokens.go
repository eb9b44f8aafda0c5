package sim

import (
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// Special tokens of o200k_base that the renderer inserts itself. They are the
// chat markers of the GPT-4o family; the tokenizer library never produces them from text (it
// encodes "<|im_start|>" in text as ordinary characters), so a user cannot forge a role marker.
const (
	// TokenStart (<|im_start|>) opens an item: [TokenStart, role…, TokenSep, body…, TokenEnd].
	TokenStart uint32 = 200264
	// TokenEnd (<|im_end|>) closes an item.
	TokenEnd uint32 = 200265
	// TokenSep (<|im_sep|>) separates an item's header (role) from its body.
	TokenSep uint32 = 200266
)

// Bounds that keep the tokenizer's cost per byte constant (see the package doc, "Rendering").
const (
	// maxWhitespaceRun is the longest run of whitespace bytes encoded in one piece: the
	// tokenizer's split pattern is quadratic in the length of a whitespace run.
	maxWhitespaceRun = 64
	// maxChunk is the longest text, in bytes, encoded in one call.
	maxChunk = 2048
)

var codec = sync.OnceValue(func() tokenizer.Codec {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		panic("sampler: o200k_base unavailable: " + err.Error())
	}
	return c
})

// encodeStats counts the tokenizer's work when countEncodes is set (by tests, before any
// rollout starts), so tests can prove a resume encodes only new input. Off in production: two
// atomic adds on one shared cache line per encode would make every core's rollouts contend.
var countEncodes bool

var encodeStats struct {
	calls atomic.Int64 // Encode calls
	bytes atomic.Int64 // bytes encoded
}

// appendEncoded appends the o200k_base tokens of s to dst. Long texts and long whitespace runs
// are cut into bounded chunks encoded one by one, so the cost is linear in len(s); the cut
// points depend on s only, so the result is a pure function of s. The tokens of segments met
// before come from the segment cache (segments.go).
func appendEncoded(dst []uint32, s string) []uint32 { return appendEncodedUntil(dst, s, nil) }

// appendEncodedUntil is appendEncoded that, after each chunk, asks more (when not nil) with the
// chunk's length in bytes and len(dst) whether to go on; it stops between two chunks when more
// says no.
func appendEncodedUntil(dst []uint32, s string, more func(n, tokens int) bool) []uint32 {
	encodeChunksUntil(s, func(chunk string) bool {
		encodeChunk(chunk, func(t token) bool {
			dst = append(dst, t.id())
			return true
		})
		return more == nil || more(len(chunk), len(dst))
	})
	return dst
}

// countTokens returns the number of tokens appendEncoded would append for s.
func countTokens(s string) int {
	n := 0
	encodeChunks(s, func(chunk string) {
		encodeChunk(chunk, func(token) bool { n++; return true })
	})
	return n
}

func encodeChunks(s string, fn func(chunk string)) {
	encodeChunksUntil(s, func(chunk string) bool { fn(chunk); return true })
}

// encodeChunksUntil calls fn with each chunk of s in order (see chunker), until fn returns
// false.
func encodeChunksUntil(s string, fn func(chunk string) bool) {
	c := chunker{buf: s}
	for {
		chunk, _, ok := c.next(0)
		if !ok || !fn(chunk) {
			return
		}
	}
}

// chunker cuts a text into the chunks it is encoded in (chunkLen), in order, counting each in
// encodeStats: a text held whole (appendEncoded, countTokens), or one a textSource yields in
// parts, taken in as the chunks need them (the sim's stream). Either way the chunks are those
// of the whole text. It is the one loop over chunks: both callers go through next.
type chunker struct {
	buf string     // the text from the first byte still kept on
	at  int        // the next chunk's start in buf
	src textSource // the rest of the text; nil once it has ended (or for a text held whole)
}

// next returns the next chunk, or false at the text's end. With a source it first takes parts
// in until lookahead bytes past the chunk's start are held, or the text has ended: chunkLen
// looks at no more, so the chunk is cut where it would be in the whole text. keep is the first
// byte of buf the caller still needs (the stream's delta being built): the bytes before it are
// dropped when a part is appended, and shift is how far every offset into buf moved then (the
// caller's own move by as much, whether a chunk is returned or not).
func (c *chunker) next(keep int) (chunk string, shift int, ok bool) {
	for c.src != nil && len(c.buf)-c.at < lookahead {
		part, more := c.src.next()
		if !more {
			c.src = nil
			break
		}
		c.buf = c.buf[keep:] + part // what the caller no longer needs is dropped
		c.at -= keep
		shift, keep = shift+keep, 0
	}
	if c.at >= len(c.buf) {
		return "", shift, false
	}
	chunk = c.buf[c.at : c.at+chunkLen(c.buf[c.at:])]
	c.at += len(chunk)
	countEncode(len(chunk))
	return chunk, shift, true
}

// countEncode counts the encoding of a chunk of n bytes in encodeStats (when countEncodes).
func countEncode(n int) {
	if countEncodes {
		encodeStats.calls.Add(1)
		encodeStats.bytes.Add(int64(n))
	}
}

// chunkLen returns the length of the next chunk of s to encode: all of s if it is short and
// has no long whitespace run; otherwise it cuts right after maxWhitespaceRun bytes of a
// whitespace run, or before maxChunk bytes at the last word start (a non-space after a space),
// or at a rune boundary.
func chunkLen(s string) int {
	run := 0       // length of the whitespace run ending at i
	wordStart := 0 // last index of a space followed by a non-space (cut before the space)
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if i+size > maxChunk {
			if wordStart > maxChunk/2 {
				return wordStart
			}
			if i == 0 {
				return size
			}
			return i
		}
		if isSpace(r) {
			if run+size > maxWhitespaceRun && run > 0 {
				return i
			}
			run += size
		} else {
			if run > 0 && i-run > 0 {
				wordStart = i - run
			}
			run = 0
		}
		i += size
	}
	return len(s)
}

func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return r >= utf8.RuneSelf && unicode.IsSpace(r)
}
