package sim

import (
	"encoding/json"
	"strconv"

	"github.com/tetherd/tether/protocol"
)

// quoteLimit is how many characters of each user text and tool output the answer quotes.
const quoteLimit = 64

var fillerWords = []string{"the", "model", "keeps", "its", "state", "while", "tools", "run", "and", "then", "it", "goes", "on", "from", "where", "stopped"}

// fillerLine is how many filler words make one line of the answer.
const fillerLine = 16

// answerPart is about how many bytes of the answer the sim produces at a time: a part may be
// a line longer (a quote, 16 filler words), and twice as long as JSON.
const answerPart = 4 << 10

// formatAnswer returns the answer shaped by text.format, as the text value followed by what src
// yields (nil: nothing): json_schema → a value synthesised from the schema (strings are the
// last word of the last user text) of at most limit bytes, built before it is streamed (cut
// reports that it was cut at limit); json_object → {"answer": the plain answer}; anything else
// the plain answer. The plain answer and its JSON form come from src, produced as they
// stream, whatever their length (value "").
func formatAnswer(format json.RawMessage, c *Context, padTokens, limit int) (value string, src textSource, cut bool) {
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if len(format) > 0 {
		_ = json.Unmarshal(format, &f)
	}
	switch f.Type {
	case "json_schema":
		v, cut := synthValue(f.Schema, keyword(c.LastUserText()), limit)
		return v, nil, cut
	case "json_object":
		return "", newAnswer(c, padTokens, true), false
	}
	return "", newAnswer(c, padTokens, false), false
}

// The phases of an answer, in order.
const (
	phaseQuotes = iota
	phaseFiller
	phaseFingerprint
	phaseEnded
)

// answerSource is the sim's plain answer as a textSource, produced part by part: one line per
// user text and tool output of the context (`user: "…"`, `tool: "…"`, Go-quoted, each cut to
// quoteLimit characters plus "…"), then, for padTokens > 0, that many filler words (a line of
// fillerLine, a space between words) and a newline, then the context fingerprint. With
// asJSON it is {"answer": that text}, byte for byte what json.Marshal of a map holding it
// writes. It holds one part at a time: an answer of a million filler words is never built.
type answerSource struct {
	c      *Context
	item   int // the next item of c to quote
	pad    int // filler words to write
	word   int // filler words written
	phase  int
	asJSON bool
	opened bool // asJSON: `{"answer":"` is written
	closed bool // asJSON: `"}` is written
	raw    []byte
	out    []byte
}

// newAnswer returns the answer to the context c with padTokens filler words (see answerSource).
func newAnswer(c *Context, padTokens int, asJSON bool) *answerSource {
	return &answerSource{c: c, pad: max(padTokens, 0), asJSON: asJSON}
}

// next implements textSource.
func (a *answerSource) next() (string, bool) {
	raw := a.raw[:0]
	for len(raw) < answerPart && a.phase != phaseEnded {
		raw = a.appendPiece(raw)
	}
	a.raw = raw
	if !a.asJSON {
		return string(raw), len(raw) > 0
	}
	out := a.out[:0]
	if !a.opened {
		out = append(out, `{"answer":"`...)
		a.opened = true
	}
	if len(raw) > 0 {
		// A part ends between whole lines and words (valid UTF-8 each: strconv quotes the
		// texts), so escaping the parts one by one escapes the text as a whole.
		q, _ := json.Marshal(string(raw))
		out = append(out, q[1:len(q)-1]...)
	}
	if a.phase == phaseEnded && !a.closed {
		out = append(out, `"}`...)
		a.closed = true
	}
	a.out = out
	return string(out), len(out) > 0
}

// appendPiece appends the answer's next piece to b (a quote line, a line of filler words, the
// fingerprint) and moves on; it may append nothing when a phase ends.
func (a *answerSource) appendPiece(b []byte) []byte {
	switch a.phase {
	case phaseQuotes:
		items := a.c.Items()
		if a.item >= len(items) {
			a.phase = phaseFiller
			return b
		}
		it := &items[a.item]
		a.item++
		switch {
		case it.Type == protocol.ItemMessage && it.Role == protocol.RoleUser:
			b = appendQuote(append(b, "user: "...), it.Text())
		case it.Type == protocol.ItemFunctionCallOutput:
			b = appendQuote(append(b, "tool: "...), outputText(it))
		default:
			return b
		}
		return append(b, '\n')
	case phaseFiller:
		if a.pad == 0 {
			a.phase = phaseFingerprint
			return b
		}
		for end := min(a.word+fillerLine, a.pad); a.word < end; a.word++ {
			if a.word > 0 && a.word%fillerLine == 0 {
				b = append(b, '\n')
			} else if a.word > 0 {
				b = append(b, ' ')
			}
			b = append(b, fillerWords[a.word%len(fillerWords)]...)
		}
		if a.word == a.pad {
			b = append(b, '\n')
			a.phase = phaseFingerprint
		}
		return b
	case phaseFingerprint:
		a.phase = phaseEnded
		return append(b, a.c.Fingerprint()...)
	}
	return b
}

// appendQuote appends s cut to quoteLimit characters ("…" after a cut), Go-quoted.
func appendQuote(b []byte, s string) []byte {
	cut := truncRunes(s, quoteLimit)
	if len(cut) < len(s) {
		cut += "…"
	}
	return strconv.AppendQuote(b, cut)
}
