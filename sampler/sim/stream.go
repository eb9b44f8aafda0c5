package sim

import (
	"unicode/utf8"
)

// This file streams the sim's output: a text is generated token by token and emitted in
// word-ish deltas. A text comes from a textSource, part by part, so that an answer of a
// million tokens (sim.answer_tokens) is produced as it streams and never held whole: the
// stream holds the delta being built and the tokenizer's next chunk, a few KiB.

// maxDeltaTokens is the most tokens one delta carries.
const maxDeltaTokens = 8

// textSource yields a text in parts, in order: next returns the next part, or false once the
// text has ended. The parts may be cut anywhere, even inside a character: the stream
// tokenizes and emits their concatenation exactly as it would the whole text.
type textSource interface {
	next() (string, bool)
}

// lookahead is how many bytes of text the stream holds beyond a chunk's start before it cuts
// the chunk: chunkLen looks at no more, so a chunk is cut where it would be in the whole text.
const lookahead = maxChunk + utf8.UTFMax

// stream generates text token by token and emits it through emit in word-ish deltas (a delta
// ends before a token starting with a space or newline, or after maxDeltaTokens tokens, never
// inside a UTF-8 character). emit nil generates without emitting (a call's name). It stops at
// the step's token budget, setting st.incomplete. ids, when not nil, receives the ids of the
// tokens generated.
func (st *simStep) stream(text string, emit func(string) error, ids *[]uint32) error {
	return st.streamFrom(text, nil, emit, ids)
}

// streamFrom is stream of head followed by the text src yields (nil: none). Its chunker takes
// parts in as it goes, holding the text from the start of the delta being built on, and at
// least lookahead bytes past the next chunk's start (or the rest of the text): the chunks,
// hence the tokens and the deltas, are those of the whole text.
func (st *simStep) streamFrom(head string, src textSource, emit func(string) error, ids *[]uint32) error {
	var err error
	c := chunker{buf: head, src: src} // c.buf: the text from the delta being built on
	// In c.buf: the delta's start, the next token's start (it falls behind the next chunk's
	// start, c.at, when the tokenizer drops a character); n is the delta's tokens.
	from, pos, n := 0, 0, 0
	flush := func(end int) bool {
		if end <= from {
			return true
		}
		if err = st.wait(); err != nil {
			return false
		}
		if emit != nil {
			if err = emit(c.buf[from:end]); err != nil {
				return false
			}
		}
		from, n = end, 0
		return true
	}
	token := func(t token) bool {
		if st.full() {
			return false
		}
		if n > 0 && utf8.RuneStart(c.buf[pos]) && (n >= maxDeltaTokens || c.buf[pos] == ' ' || c.buf[pos] == '\n') {
			if !flush(pos) {
				return false
			}
		}
		if ids != nil {
			*ids = append(*ids, t.id())
		}
		pos += t.size()
		n++
		st.generated++
		st.due += st.cost.decode(1)
		return true
	}
	for {
		chunk, shift, ok := c.next(from) // what was emitted is dropped
		pos, from = pos-shift, from-shift
		if !ok || !encodeChunk(chunk, token) {
			break
		}
	}
	if err != nil {
		return err
	}
	end := pos
	for end > from && !utf8.ValidString(c.buf[from:end]) {
		end-- // a cut inside a character: drop its leading bytes
	}
	flush(end)
	return err
}
