package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler"
)

// request is one sampling step as the sim sees it.
type request struct {
	Settings *sampler.Settings
	// Context is the rendered context of the step (read-only during the step).
	Context *Context
	// Cached is the number of leading tokens of Context already in the sim's state.
	Cached int
	// Step is the step's index in the rollout; Calls the function calls made before it.
	Step  int
	Calls int
	// Budget is the server's memory budget (sampler.RolloutInfo.Budget; nil: none).
	Budget sampler.Budget
	// session holds the rollout's caches (nil: none, everything is computed afresh).
	session *session
}

// tool returns what the sim reads of t: from the session's cache when t is unchanged since it
// was cached.
func (req *request) tool(t *protocol.Tool) *toolInfo {
	ss := req.session
	if ss == nil {
		return newToolInfo(t)
	}
	if info, ok := ss.tools[t]; ok && bytes.Equal(info.raw, t.Parameters) {
		return info
	}
	if len(ss.tools) >= maxCachedTools {
		clear(ss.tools)
	}
	info := newToolInfo(t)
	ss.tools[t] = info
	return info
}

// nameTokens returns the tokens of a tool's name (appendEncoded(nil, name)), from the session's
// cache when it has them. The names are those of the settings' tools, so the cache is bounded
// by them; it is cleared past maxCachedTools all the same.
func (req *request) nameTokens(name string) []uint32 {
	ss := req.session
	if ss == nil {
		return appendEncoded(nil, name)
	}
	if ids, ok := ss.names[name]; ok {
		return ids
	}
	if len(ss.names) >= maxCachedTools {
		clear(ss.names)
	}
	ids := appendEncoded(nil, name)
	ss.names[name] = ids
	return ids
}

// generated returns a buffer for the ids of a call's arguments as the step generates them, or
// nil without a session.
func (req *request) generated() *[]uint32 {
	ss := req.session
	if ss == nil {
		return nil
	}
	if len(ss.gen) < cap(ss.gen) {
		ss.gen = ss.gen[:len(ss.gen)+1]
	} else {
		ss.gen = append(ss.gen, genCall{})
	}
	g := &ss.gen[len(ss.gen)-1]
	g.name, g.args, g.ids = "", "", g.ids[:0]
	return &g.ids
}

// keepGenerated marks the buffer generated returned last as holding the whole arguments args
// of a call of name: the next step appends that call's item without encoding it again.
func (req *request) keepGenerated(name, args string, ids *[]uint32) {
	if ids == nil {
		return
	}
	g := &req.session.gen[len(req.session.gen)-1]
	g.name, g.args = name, args
}

// maxCachedTools bounds a session's caches of tools and tool names.
const maxCachedTools = 256

// genCall is a function call the sim generated in the previous step: its name, its whole
// arguments, and their tokens.
type genCall struct {
	name, args string // args "": not kept (cut short)
	ids        []uint32
}

// session is one rollout's sim state: the rollout's context rendered into o200k_base tokens,
// appended to as items arrive, and how many of its tokens the "model" holds.
type session struct {
	sim      *Sim
	settings *sampler.Settings
	context  *Context
	budget   sampler.Budget // the server's memory budget (RolloutInfo.Budget; nil: none)
	// prefilled is the number of leading tokens of context in the model's state: 0 for a new
	// rollout (the cold path), the warm-up's context after Prefill, everything up to the end
	// of the previous step's output after a step.
	prefilled int

	// The rollout's caches: the tools' parsed schemas, the tokens of the tool names called,
	// and the tokens of the calls the previous step generated (the model's own output, which
	// it does not tokenize again when the step's items come back).
	tools map[*protocol.Tool]*toolInfo
	names map[string][]uint32
	gen   []genCall

	// lag holds the items handed to the session whose rendering stopped when a step's context
	// ended (feed): they come before any other item into the context.
	lag []protocol.Item
}

// renderGenerated appends the render of it when it is a function_call the previous step
// generated whole (the same name and arguments): header, name, " ", the arguments' tokens as
// generated. It reports false for any other item.
func (ss *session) renderGenerated(dst []uint32, it *protocol.Item) ([]uint32, bool) {
	if it.Type != protocol.ItemFunctionCall {
		return dst, false
	}
	for i := range ss.gen {
		g := &ss.gen[i]
		if g.args == "" || g.name != it.Name || g.args != it.Arguments {
			continue
		}
		name, ok := ss.names[g.name]
		if !ok {
			return dst, false
		}
		dst = appendHeader(dst, protocol.RoleAssistant)
		dst = append(dst, name...)
		dst = append(dst, spaceTokens()...)
		dst = append(dst, g.ids...)
		g.args = "" // each generated call renders one item
		return append(dst, TokenEnd), true
	}
	return dst, false
}

// Open implements sampler.Model. The session renders the instructions at once; items are
// rendered as Prefill and Sample receive them, each only once.
func (s *Sim) Open(ctx context.Context, info sampler.RolloutInfo) (sampler.ModelSession, error) {
	c, err := openContext(ctx, info.Settings, max(s.opts.ContextWindow, 0))
	if err != nil {
		return nil, err
	}
	return newSession(s, info, c, 0), nil
}

// newSession is a session of the rollout info over c with empty caches.
func newSession(s *Sim, info sampler.RolloutInfo, c *Context, prefilled int) *session {
	return &session{sim: s, settings: info.Settings, context: c, prefilled: prefilled, budget: info.Budget,
		tools: make(map[*protocol.Tool]*toolInfo), names: make(map[string][]uint32)}
}

// Prefill implements sampler.ModelSession: the input is rendered and counts as in the model's
// state (a warm-up's tokens are cached for the next step).
func (ss *session) Prefill(ctx context.Context, input []protocol.Item) error {
	if err := ss.feed(ctx, input, nil); err != nil {
		return err
	}
	ss.prefilled = ss.context.Len()
	return nil
}

// feed renders the session's lag, then items, into its context (known as for
// Context.append). When ctx ends before they are rendered (a long tokenizing stopped), they
// are all kept, in order, as the lag, and the next feed renders them first: the context
// always ends up holding every item the rollout handed over, even when a steer cut the step
// that was tokenizing them.
func (ss *session) feed(ctx context.Context, items []protocol.Item, known func(dst []uint32, it *protocol.Item) ([]uint32, bool)) error {
	if len(ss.lag) > 0 {
		ss.lag = append(ss.lag, items...)
		items, known = ss.lag, nil
	}
	if err := ss.context.append(ctx, items, known); err != nil {
		ss.lag = slices.Clip(items) // an append to the lag must not write into the caller's array
		return err
	}
	ss.lag = nil
	return nil
}

// Sample implements sampler.ModelSession. The previous step's output is in the model's state
// (it generated it); the step's input is prefilled. Usage: input_tokens is the whole context,
// cached_tokens what was in the model's state before the input.
func (ss *session) Sample(ctx context.Context, step *sampler.Step, out sampler.Output) (sampler.StepResult, error) {
	if err := ss.feed(ctx, step.Output, ss.renderGenerated); err != nil {
		ss.lag = append(ss.lag, step.Input...)
		return sampler.StepResult{}, err
	}
	if len(step.Output) > 0 {
		ss.prefilled = ss.context.Len()
	}
	ss.gen = ss.gen[:0]
	if err := ss.feed(ctx, step.Input, nil); err != nil {
		return sampler.StepResult{}, err
	}
	req := request{Settings: ss.settings, Context: ss.context, Cached: ss.prefilled, Step: step.Index, Calls: step.Calls,
		Budget: ss.budget, session: ss}
	res, err := ss.sim.sample(ctx, &req, out)
	ss.prefilled = ss.context.Len()
	return res, err
}

// Close implements sampler.ModelSession; the sim holds nothing outside the session.
func (ss *session) Close() {}

// parkVersion is the first byte of a parked sim session's state.
const parkVersion = 1

// StateBytes implements sampler.StateSizer: the rendered context, 4 bytes a token, with the
// room its slice has grown (Park's state holds the tokens alone; items not rendered yet are
// counted with the rollout's items), and the token buffers of the calls the steps generated
// (kept for the next step, and reused by the steps after it).
func (ss *session) StateBytes() int64 {
	n := 4 * int64(cap(ss.context.tokens))
	for _, g := range ss.gen[:cap(ss.gen)] {
		n += 4 * int64(cap(g.ids))
	}
	return n
}

// Park implements sampler.ParkableSession. The state is the rendered context as it is:
// a version byte, the prefilled token count (uvarint), then every token (4 bytes, little
// endian); the items are the rollout's, handed back to Unpark.
func (ss *session) Park() ([]byte, error) {
	if len(ss.lag) > 0 {
		// Items whose rendering a step's end cut: the state must hold them.
		if err := ss.feed(context.Background(), nil, nil); err != nil {
			return nil, err
		}
	}
	toks := ss.context.tokens
	b := make([]byte, 0, 1+binary.MaxVarintLen64+4*len(toks))
	b = append(b, parkVersion)
	b = binary.AppendUvarint(b, uint64(ss.prefilled))
	for _, t := range toks {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	return b, nil
}

// Unpark implements sampler.Unparker: the session's tokens come from state as Park wrote
// them, not rendered again; fed, the items they were rendered from, give the sim its facts
// (the last user text, the calls of the turn) and its quotes without being rendered.
// A state Park did not write returns an error wrapping ErrBadState.
func (s *Sim) Unpark(_ context.Context, info sampler.RolloutInfo, state []byte, fed []protocol.Item) (sampler.ModelSession, error) {
	if len(state) < 1 || state[0] != parkVersion {
		return nil, fmt.Errorf("%w: unknown version", ErrBadState)
	}
	prefilled, n := binary.Uvarint(state[1:])
	rest := state[1+max(n, 0):]
	if n <= 0 || len(rest)%4 != 0 || prefilled > uint64(len(rest)/4) {
		return nil, fmt.Errorf("%w: %d bytes do not hold a rendered context", ErrBadState, len(state))
	}
	c := &Context{calls: make(map[string]struct{}), tokens: make([]uint32, len(rest)/4), window: max(s.opts.ContextWindow, 0)}
	for i := range c.tokens {
		c.tokens[i] = binary.LittleEndian.Uint32(rest[4*i:])
	}
	for i := range fed {
		c.note(&fed[i])
	}
	c.items = fed
	return newSession(s, info, c, int(prefilled)), nil
}
