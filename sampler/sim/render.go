package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// Context is a rollout's context: the items the model sees, in order, and their rendering into
// o200k_base tokens. It only ever grows: Append renders the new items alone
// and appends their tokens, so Tokens always equals RenderItems of the same settings and items.
// A Context is owned by one goroutine (the rollout's); a Model may read it during Sample.
type Context struct {
	tokens []uint32
	items  []protocol.Item
	calls  map[string]struct{} // call_ids of the function_call items

	// Incremental facts the sim reads in O(1).
	nCalls        int    // function_call items
	turnCallSteps int    // groups of consecutive function_call items since the last user message
	inCallGroup   bool   // the last item is a function_call
	lastUserText  string // text of the last user message
	rendered      int    // items rendered (instructions excluded)

	// window is the model's context window in tokens (0: none): a render that would take the
	// context past it stops as soon as it does, and adds nothing (windowError).
	window int

	// The FNV-64a hash of tokens[:hashed], continued by Fingerprint: a final answer hashes
	// only the tokens added since the last one.
	hash   uint64
	hashed int
}

// NewContext returns a Context holding the render of settings.Instructions (a "system" item)
// when they are not empty, and no items. Long instructions are tokenized in a heavy-work slot
// (protocol.CPUSlot) and stop, with ctx's error, when ctx ends before or while they are.
func NewContext(ctx context.Context, settings *sampler.Settings) (*Context, error) {
	return openContext(ctx, settings, 0)
}

// openContext is NewContext for a model whose context window is window tokens (0: none):
// instructions that would pass it are a windowError, found without tokenizing more than the
// window's worth of them.
func openContext(ctx context.Context, settings *sampler.Settings, window int) (*Context, error) {
	c := &Context{calls: make(map[string]struct{}), window: window}
	if settings != nil && settings.Instructions != "" {
		n := len(settings.Instructions)
		err := render(ctx, n, c.limit(n+len(protocol.RoleSystem)+3), func(st *stopper) {
			c.tokens = renderText(c.tokens, protocol.RoleSystem, settings.Instructions, st)
			st.full(len(c.tokens))
		})
		if err == nil && c.over() {
			err = errWindow
		}
		if err != nil {
			return nil, c.failed(err)
		}
	}
	return c, nil
}

// limit is the token count a render of at most bound more tokens must be stopped past: the
// context window when the render could pass it, else 0 (the render runs unwatched).
func (c *Context) limit(bound int) int {
	if c.window > 0 && len(c.tokens)+bound > c.window {
		return c.window
	}
	return 0
}

// over reports whether the context has passed its window.
func (c *Context) over() bool { return c.window > 0 && len(c.tokens) > c.window }

// failed returns the error of a render that stopped with err: err, or windowError's
// *protocol.Error for errWindow.
func (c *Context) failed(err error) error {
	if err == errWindow {
		return windowError(c.window)
	}
	return err
}

// Append adds items to the context and renders only them. A MiB of text or more is tokenized
// in a heavy-work slot (protocol.CPUSlot), and when ctx ends before or while it is, Append
// returns ctx's error and the context is as it was. A Context from NewContext has no context
// window.
func (c *Context) Append(ctx context.Context, items ...protocol.Item) error {
	return c.append(ctx, items, nil)
}

// append adds items; known, when not nil, appends the render of an item it already has (the
// model's own output) and reports whether it did, so the item is not encoded again. What it
// appends must be appendItem's render. When ctx ends first, nothing is added. When the items
// would take the context past its window, nothing is added either and the error is
// windowError's: the render stops after the first chunk of text that passes the window, so a
// huge input costs no more than the window's worth of tokenizing. Whether the window must be
// watched at all is settled first from the items' bytes (maxTokens): an input whose bound
// fits renders exactly as without a window.
func (c *Context) append(ctx context.Context, items []protocol.Item, known func(dst []uint32, it *protocol.Item) ([]uint32, bool)) error {
	start := len(c.tokens)
	text, bound := itemSizes(items)
	err := render(ctx, text, c.limit(bound), func(st *stopper) {
		for i := range items {
			it := &items[i]
			ok := false
			if known != nil {
				c.tokens, ok = known(c.tokens, it)
			}
			if !ok {
				c.tokens = appendItem(c.tokens, it, st)
			}
			if st.full(len(c.tokens)) || st.stopped() {
				return
			}
		}
	})
	if err == nil && c.over() {
		err = errWindow // the bound was wrong: the window holds all the same
	}
	if err != nil {
		c.tokens = c.tokens[:start] // never hashed: Fingerprint hashed at most tokens[:start]
		return c.failed(err)
	}
	for i := range items {
		c.rendered++
		c.note(&items[i])
	}
	c.items = append(c.items, items...)
	return nil
}

// render runs fill, the tokenizing of about n bytes of text. From protocol.HeavyBytes on,
// that is heavy work: it waits for a heavy-work slot (protocol.CPUSlot) and fill gets a
// stopper that ends it between chunks once ctx has ended; render then returns ctx's error
// (and fill's tokens are partial). With limit > 0 fill gets a stopper that also ends it
// between chunks once the render holds more than limit tokens; render then returns errWindow.
// Else, below HeavyBytes, fill gets a nil stopper and runs whole.
func render(ctx context.Context, n, limit int, fill func(st *stopper)) error {
	release, err := protocol.CPUSlot(ctx, n)
	if err != nil {
		return err
	}
	defer release()
	var st *stopper
	switch {
	case n >= protocol.HeavyBytes:
		st = &stopper{ctx: ctx, limit: limit}
	case limit > 0:
		st = &stopper{limit: limit}
	}
	fill(st)
	return st.error()
}

// stopEvery is how many bytes a stopper lets be tokenized between two looks at its context.
const stopEvery = 64 << 10

// stopper ends a long tokenizing once its context has ended: encode looks at the context
// every stopEvery bytes, between the chunks appendEncoded cuts a text into (a chunk takes
// microseconds). With a limit it also ends it after the first chunk (or item) that takes the
// render past limit tokens. A nil *stopper never stops.
type stopper struct {
	ctx   context.Context // nil: never looked at
	limit int             // tokens the render must not pass (0: none)
	since int             // bytes tokenized since the last look
	err   error           // the context's error, or errWindow, once it has stopped
}

// encode is appendEncoded(dst, s) until st stops; once it has, it appends nothing more.
func (st *stopper) encode(dst []uint32, s string) []uint32 {
	if st == nil {
		return appendEncoded(dst, s)
	}
	if st.err != nil {
		return dst
	}
	return appendEncodedUntil(dst, s, st.more)
}

// more counts n more bytes tokenized, the render now holding tokens tokens: false once they
// pass the limit, or (it looks every stopEvery bytes) once the context has ended.
func (st *stopper) more(n, tokens int) bool {
	if st.full(tokens) {
		return false
	}
	if st.ctx == nil {
		return true
	}
	if st.since += n; st.since >= stopEvery {
		st.since = 0
		st.err = st.ctx.Err()
	}
	return st.err == nil
}

// full stops st with errWindow when tokens, the render's length, pass its limit, and reports
// whether it did. A nil *stopper is never full.
func (st *stopper) full(tokens int) bool {
	if st == nil || st.limit <= 0 || tokens <= st.limit {
		return false
	}
	st.err = errWindow
	return true
}

// stopped reports whether st has stopped.
func (st *stopper) stopped() bool { return st != nil && st.err != nil }

// error is the error st stopped with, nil while it runs (and for a nil st).
func (st *stopper) error() error {
	if st == nil {
		return nil
	}
	return st.err
}

// note updates the context's incremental facts for it, appended (rendered or not).
func (c *Context) note(it *protocol.Item) {
	switch {
	case it.Type == protocol.ItemFunctionCall:
		c.nCalls++
		c.calls[it.CallID] = struct{}{}
		if !c.inCallGroup {
			c.turnCallSteps++
		}
		c.inCallGroup = true
		return
	case it.Type == protocol.ItemMessage && it.Role == protocol.RoleUser:
		c.turnCallSteps = 0
		c.lastUserText = messageText(it)
	}
	c.inCallGroup = false
}

// Fingerprint returns Fingerprint(c.Tokens()), hashing only the tokens added since its last
// call.
func (c *Context) Fingerprint() string {
	if c.hashed == 0 {
		c.hash = fnvOffset
	}
	c.hash = fnvTokens(c.hash, c.tokens[c.hashed:])
	c.hashed = len(c.tokens)
	return formatFingerprint(c.hashed, c.hash)
}

// Tokens returns the rendered context. The slice is shared: do not modify it.
func (c *Context) Tokens() []uint32 { return c.tokens }

// Len returns the number of tokens in the context.
func (c *Context) Len() int { return len(c.tokens) }

// Items returns the context's items in order (instructions are not an item). The slice is
// shared and append-only: its first len elements never change, so it may be read by another
// goroutine while the owner appends.
func (c *Context) Items() []protocol.Item { return c.items[:len(c.items):len(c.items)] }

// HasCall reports whether a function_call with callID is in the context.
func (c *Context) HasCall(callID string) bool {
	_, ok := c.calls[callID]
	return ok
}

// Calls returns the number of function_call items in the context.
func (c *Context) Calls() int { return c.nCalls }

// TurnCallSteps returns the number of tool-call steps (groups of consecutive function_call
// items) since the last user message, or since the start when there is none.
func (c *Context) TurnCallSteps() int { return c.turnCallSteps }

// LastUserText returns the text of the last user message, or "".
func (c *Context) LastUserText() string { return c.lastUserText }

// Rendered returns how many items this Context has rendered since NewContext.
func (c *Context) Rendered() int { return c.rendered }

// RenderItems returns the full render of a context: the instructions of settings (if any) as a
// "system" item, then each item's render, concatenated. It is what a
// Context's Tokens hold after Append(items...), and what the cold path pays for.
func RenderItems(settings *sampler.Settings, items []protocol.Item) []uint32 {
	ctx := context.Background() // it never ends: neither call can fail
	c, _ := NewContext(ctx, settings)
	_ = c.Append(ctx, items...)
	return c.tokens
}

// appendItem appends the render of one item: [TokenStart, header…, TokenSep, body…, TokenEnd].
// Ids and call_ids are never rendered: the model's output must not depend on them.
//
//	message               header: role             body: the text of its parts ("[type]" for non-text parts)
//	function_call         header: "assistant"      body: name, a space, arguments
//	function_call_output  header: "tool"           body: output (text of its parts when an array)
//	anything else         header: its type         body: the strings of Raw under text-like keys
//
// Its body's texts are tokenized through st (nil: whole).
func appendItem(dst []uint32, it *protocol.Item, st *stopper) []uint32 {
	switch it.Type {
	case protocol.ItemMessage:
		dst = appendHeader(dst, it.Role)
		for i := range it.Content {
			p := &it.Content[i]
			if p.Text == "" && len(p.Raw) > 0 {
				dst = st.encode(dst, "["+p.Type+"]")
				continue
			}
			dst = st.encode(dst, p.Text)
		}
	case protocol.ItemFunctionCall:
		dst = appendHeader(dst, protocol.RoleAssistant)
		dst = st.encode(dst, it.Name)
		dst = st.encode(dst, " ")
		dst = st.encode(dst, it.Arguments)
	case protocol.ItemFunctionCallOutput:
		dst = appendHeader(dst, "tool")
		dst = st.encode(dst, outputText(it))
	default:
		dst = appendHeader(dst, it.Type)
		for _, s := range rawTexts(it.Raw) {
			dst = st.encode(dst, s)
		}
	}
	return append(dst, TokenEnd)
}

// spaceTokens are the tokens of " ", between a function_call's name and its arguments.
var spaceTokens = sync.OnceValue(func() []uint32 { return appendEncoded(nil, " ") })

// renderText appends an item with the given header and body text, tokenized through st (nil:
// whole).
func renderText(dst []uint32, header, body string, st *stopper) []uint32 {
	dst = appendHeader(dst, header)
	dst = st.encode(dst, body)
	return append(dst, TokenEnd)
}

// headers caches rendered headers. Item types are client input (unknown types pass through),
// so the cache takes at most maxHeaders entries of at most 32 bytes.
var (
	headers     sync.Map // header string → []uint32 (TokenStart, header tokens, TokenSep)
	headerCount atomic.Int32
)

const maxHeaders = 256

func appendHeader(dst []uint32, header string) []uint32 {
	if h, ok := headers.Load(header); ok {
		return append(dst, h.([]uint32)...)
	}
	h := []uint32{TokenStart}
	h = appendEncoded(h, header)
	h = append(h, TokenSep)
	if len(header) <= 32 && headerCount.Load() < maxHeaders {
		if _, loaded := headers.LoadOrStore(header, h); !loaded {
			headerCount.Add(1)
		}
	}
	return append(dst, h...)
}

// messageText returns the text of a message's parts, concatenated.
func messageText(it *protocol.Item) string { return it.Text() }

// outputText returns a function_call_output's text: Output, or its parts' texts joined.
func outputText(it *protocol.Item) string {
	if it.OutputParts == nil {
		return it.Output
	}
	var b []byte
	for i := range it.OutputParts {
		b = append(b, it.OutputParts[i].Text...)
	}
	return string(b)
}

// rawTexts returns, in document order, the string values of raw JSON under the keys "text",
// "refusal", "output", "arguments", "input" and "content" (at any depth, also as array elements).
func rawTexts(raw []byte) []string {
	if len(raw) == 0 {
		return nil
	}
	type frame struct {
		object  bool
		wantKey bool
		key     string
	}
	var out []string
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(raw))
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		var key string
		if n := len(stack); n > 0 {
			key = stack[n-1].key
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, frame{object: t == '{', wantKey: t == '{', key: key})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].wantKey {
				stack[n-1].key = t
				stack[n-1].wantKey = false
				continue
			}
			switch key {
			case "text", "refusal", "output", "arguments", "input", "content":
				out = append(out, t)
			}
			valueDone()
		default:
			valueDone()
		}
	}
}

// itemSizes walks items once for what a render of them needs to know: text, about how many
// bytes of text rendering them tokenizes (their texts, names, arguments, outputs and kept raw
// JSON), and bound, how many tokens it appends at most. A token of o200k_base holds at
// least one byte of its text (FuzzRender checks it), so a text renders to at most its length
// in tokens; an item adds its three markers, its header (its role, or at most as long as its
// type) and a function_call's space; a part that is not text renders as "[type]"; and the
// strings of an unmodelled item's raw JSON decode to at most 3 bytes per byte (an invalid
// byte becomes U+FFFD).
func itemSizes(items []protocol.Item) (text, bound int) {
	for i := range items {
		it := &items[i]
		n := len(it.Name) + len(it.Arguments) + len(it.Output)
		text += n + len(it.Raw)
		bound += n + 4 + len(it.Type) + len(it.Role) + 3*len(it.Raw)
		for j := range it.Content {
			text += len(it.Content[j].Text) + len(it.Content[j].Raw)
			bound += len(it.Content[j].Text) + len(it.Content[j].Type) + 2
		}
		for j := range it.OutputParts {
			text += len(it.OutputParts[j].Text) + len(it.OutputParts[j].Raw)
			bound += len(it.OutputParts[j].Text)
		}
	}
	return text, bound
}

// maxTokens is itemSizes' bound alone.
func maxTokens(items []protocol.Item) int {
	_, bound := itemSizes(items)
	return bound
}
