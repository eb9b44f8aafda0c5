package sim

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/tetherd/tether/protocol"
	. "github.com/tetherd/tether/sampler"
)

// streamed is what a step streamed: its deltas, the ids of its tokens, its token count and
// why it stopped.
type streamed struct {
	deltas     []string
	ids        []uint32
	generated  int
	incomplete string
}

// streamWhole streams text as a whole, the way the sim did before it streamed in parts: every
// token of the whole text from encodePieces, a delta ending before a token that starts with a
// space or a newline or after maxDeltaTokens tokens, never inside a character.
func streamWhole(text string, budget int) streamed {
	var got streamed
	from, pos, n := 0, 0, 0
	flush := func(end int) {
		if end > from {
			got.deltas = append(got.deltas, text[from:end])
			from, n = end, 0
		}
	}
	encodePieces(text, func(id uint32, size int) bool {
		if budget > 0 && got.generated >= budget {
			got.incomplete = protocol.ReasonMaxOutputTokens
			return false
		}
		if n > 0 && utf8.RuneStart(text[pos]) && (n >= maxDeltaTokens || text[pos] == ' ' || text[pos] == '\n') {
			flush(pos)
		}
		got.ids = append(got.ids, id)
		pos += size
		n++
		got.generated++
		return true
	})
	end := pos
	for end > from && !utf8.ValidString(text[from:end]) {
		end--
	}
	flush(end)
	return got
}

// streamParts streams head and what src yields through a simStep of the token budget (0:
// none).
func streamParts(t *testing.T, head string, src textSource, budget int) streamed {
	t.Helper()
	var got streamed
	st := simStep{ctx: context.Background(), budget: budget, room: -1}
	err := st.streamFrom(head, src, func(d string) error { got.deltas = append(got.deltas, d); return nil }, &got.ids)
	if err != nil {
		t.Fatal(err)
	}
	got.generated, got.incomplete = st.generated, st.incomplete
	return got
}

// cutParts yields a text in parts of random lengths, cut anywhere (inside characters too),
// some of them empty.
type cutParts struct {
	s   string
	rng *rand.Rand
	max int
}

func (c *cutParts) next() (string, bool) {
	if c.s == "" {
		return "", false
	}
	n := min(c.rng.IntN(c.max+1), len(c.s))
	part := c.s[:n]
	c.s = c.s[n:]
	return part, true
}

// streamTexts are texts whose chunks and tokens are cut in every way the tokenizer knows:
// long texts of words, long whitespace runs, multi-byte characters, DEL (which the tokenizer
// drops). (The sim streams valid UTF-8 only: its quotes are Go-quoted, its values JSON.)
func streamTexts() map[string]string {
	rng := rand.New(rand.NewPCG(7, 11))
	words := []string{"the", "model", "keeps", "état", "日本語の", "🙂🙂", "x", "123", "4567", "\n", "  ", "\t", "-->", `"q"`}
	var prose strings.Builder
	for prose.Len() < 12<<10 {
		prose.WriteString(words[rng.IntN(len(words))])
		if rng.IntN(3) > 0 {
			prose.WriteByte(' ')
		}
	}
	return map[string]string{
		"empty":      "",
		"short":      "Hello, world.",
		"prose":      prose.String(),
		"whitespace": "a" + strings.Repeat(" \n", 3000) + "b" + strings.Repeat(" ", 5000) + "c",
		"no spaces":  strings.Repeat("abcdefghij", 1000),
		"multibyte":  strings.Repeat("日本語のテキスト、", 800),
		"del":        strings.Repeat("a\x7fb ", 900),
		"filler":     answerString(&Context{}, 3000, false),
	}
}

// TestStreamPartsAsWhole: a text streamed from parts, cut anywhere (after a head string, or
// not), gives the deltas and the tokens of the whole text streamed at once, also when the
// step's token budget stops it midway.
func TestStreamPartsAsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, text := range streamTexts() {
		for _, budget := range []int{0, 7, 1000} {
			want := streamWhole(text, budget)
			if budget == 0 && strings.Join(want.deltas, "") != strings.ToValidUTF8(text, "") && !strings.Contains(text, "\x7f") {
				t.Fatalf("%s: the reference streamed %d of %d bytes", name, len(strings.Join(want.deltas, "")), len(text))
			}
			for _, maxPart := range []int{0, 9, 100, 5000, 1 << 20} {
				head, rest := "", text
				if maxPart == 0 { // a head, and the rest in one part
					head, rest, maxPart = text[:len(text)/3], text[len(text)/3:], len(text)
				}
				got := streamParts(t, head, &cutParts{s: rest, rng: rng, max: maxPart}, budget)
				if !slices.Equal(got.deltas, want.deltas) || !slices.Equal(got.ids, want.ids) ||
					got.generated != want.generated || got.incomplete != want.incomplete {
					t.Fatalf("%s, budget %d, parts of up to %d bytes: %d deltas, %d tokens (%q), want %d deltas, %d tokens (%q)",
						name, budget, maxPart, len(got.deltas), got.generated, got.incomplete, len(want.deltas), want.generated, want.incomplete)
				}
			}
		}
	}
}

// builtAnswer is the sim's answer built whole, as the sim built it before it produced it as
// it streams: the reference of TestAnswerAsBuilt.
func builtAnswer(c *Context, padTokens int) string {
	var b strings.Builder
	quote := func(s string) {
		cut := truncRunes(s, quoteLimit)
		if len(cut) < len(s) {
			cut += "…"
		}
		b.WriteString(strconv.Quote(cut))
	}
	items := c.Items()
	for i := range items {
		it := &items[i]
		switch {
		case it.Type == protocol.ItemMessage && it.Role == protocol.RoleUser:
			b.WriteString("user: ")
			quote(it.Text())
		case it.Type == protocol.ItemFunctionCallOutput:
			b.WriteString("tool: ")
			quote(outputText(it))
		default:
			continue
		}
		b.WriteByte('\n')
	}
	if padTokens > 0 {
		for i := 0; i < padTokens; i++ {
			if i > 0 && i%16 == 0 {
				b.WriteByte('\n')
			} else if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(fillerWords[i%len(fillerWords)])
		}
		b.WriteByte('\n')
	}
	b.WriteString(c.Fingerprint())
	return b.String()
}

// answerString drains the answer's parts into one string, and fails (panics: it also runs
// outside tests' goroutines) when a part is longer than the sim produces at a time.
func answerString(c *Context, padTokens int, asJSON bool) string {
	src := newAnswer(c, padTokens, asJSON)
	var b strings.Builder
	for {
		part, ok := src.next()
		if !ok {
			return b.String()
		}
		if len(part) > 4*answerPart {
			panic("an answer part of " + strconv.Itoa(len(part)) + " bytes")
		}
		b.WriteString(part)
	}
}

// TestAnswerAsBuilt: the answer produced part by part is, byte for byte, the answer the sim
// built whole, quotes of every kind, filler of every length and the fingerprint, and so is its
// json_object form; no part is longer than a few KiB, however long the answer.
func TestAnswerAsBuilt(t *testing.T) {
	c := newContext(t, nil)
	appendTo(t, c,
		userMsg("a short question"),
		userMsg(strings.Repeat("a long question with <html> & \"quotes\" ", 10)),
		protocol.Item{Type: protocol.ItemFunctionCall, CallID: "call_1", Name: "exec_command", Arguments: `{"cmd":"ls"}`},
		toolOutput("call_1", "日本語の出力\n\t\x01\u2028 and more text past the quote limit of sixty-four characters"),
		userMsg("\xff invalid \xfe bytes"),
	)
	for _, pad := range []int{0, 1, 15, 16, 17, 1000, 100_000} {
		want := builtAnswer(c, pad)
		if got := answerString(c, pad, false); got != want {
			t.Fatalf("pad %d: the answer differs from the one built whole:\n%.300q\n%.300q", pad, got, want)
		}
		wantJSON, _ := json.Marshal(map[string]string{"answer": want})
		if got := answerString(c, pad, true); got != string(wantJSON) {
			t.Fatalf("pad %d: the json_object answer differs from the one built whole:\n%.300q\n%.300q", pad, got, wantJSON)
		}
	}
}

// boundedBudget is a Budget of max bytes that remembers the most it held.
type boundedBudget struct {
	mu              sync.Mutex
	max, used, peak int64
}

func (b *boundedBudget) TryReserve(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

func (b *boundedBudget) Grow(n int64) {
	b.mu.Lock()
	b.used += n
	b.peak = max(b.peak, b.used)
	b.mu.Unlock()
}

func (b *boundedBudget) Release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *boundedBudget) held() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// TestSynthesisedValueCounted: a value the sim builds before it streams it (a json_schema
// answer, a call's arguments: here 600,000 characters) is counted in the rollout's memory
// budget while it streams. One that does not fit fails the step at once, before a byte of it
// is streamed (failed, server_error, the budget named); one that fits is held with the copy
// the rollout accrues, and given back. A call's token ids, kept for the next step, count in
// the session's state.
func TestSynthesisedValueCounted(t *testing.T) {
	const size = 100_000
	big := `{"type":"object","properties":{"s":{"type":"string","minLength":100000}},"required":["s"]}`
	for _, c := range []struct {
		name string
		set  Settings
	}{
		{"json_schema answer", Settings{TextFormat: jsonSchemaFormat(big)}},
		{"arguments", Settings{Tools: []protocol.Tool{fnTool("fill", big)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			small := &boundedBudget{max: size - 1}
			_, rec := start(t, Config{Settings: c.set, Input: []protocol.Item{userMsg("fill")}, Budget: small})
			e := rec.mustEnd(t)
			for _, ev := range rec.Events() {
				if ev.Type == protocol.EventOutputTextDelta || ev.Type == protocol.EventArgumentsDelta {
					t.Fatalf("a delta streamed of a value that did not fit: %.60q", ev.Delta)
				}
			}
			if e.Status != protocol.ResponseFailed || e.Error == nil || e.Error.Code != protocol.CodeServerError ||
				!strings.Contains(e.Error.Message, "memory budget (-max-memory)") || !strings.Contains(e.Error.Message, "one value the sim synthesised") {
				t.Fatalf("ended %s %+v: want failed, server_error naming the memory budget and the value", e.Status, e.Error)
			}
			if used, _ := small.held(); used != 0 {
				t.Fatalf("the failed step left %d bytes in the budget", used)
			}

			roomy := &boundedBudget{max: 8 * size}
			_, rec = start(t, Config{Settings: c.set, Input: []protocol.Item{userMsg("fill")}, Budget: roomy})
			var streamed int
			var sp *Suspension
			if s, e := rec.next(t); s != nil {
				sp = s
				streamed = len(s.Output[0].Arguments)
			} else {
				if e.Status != protocol.ResponseCompleted {
					t.Fatalf("ended %s %+v", e.Status, e.Error)
				}
				streamed = len(answerText(e.Output))
			}
			used, peak := roomy.held()
			if streamed < size || peak < int64(streamed)*(1+AccrueFactor) || used != 0 {
				t.Fatalf("%d bytes streamed; the budget held at most %d, now %d: want the value and its accrued copy, then nothing", streamed, peak, used)
			}
			if sp != nil && sp.StateBytes < 4*int64(sp.StepUsage.InputTokens+sp.StepUsage.OutputTokens) {
				t.Fatalf("state %d bytes: want 4 a token of the context (%d) and of the call generated (%d)",
					sp.StateBytes, sp.StepUsage.InputTokens, sp.StepUsage.OutputTokens)
			}
		})
	}
}
