package bench

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
)

// The workload: every transport runs the same rollouts. A rollout is one user message, a shell
// tool and metadata sim.calls = K: the sim calls the tool K times in a row, then answers. Each
// tool output is ToolOutputBytes of text that looks like a command's output; it depends only on
// the rollout and call numbers, so all transports send the same bytes of tool output.

const userPrompt = "Inspect the repository: run the checks one by one and summarise what you find."

// shellTool is the function tool of the workload. The sim recognises it as shell-like (name
// exec_command, required "cmd") and calls it with `echo <marker>`.
var shellTool = json.RawMessage(`{"type":"function","name":"exec_command","description":"Run a shell command and return its output.","parameters":{"type":"object","properties":{"cmd":{"type":"string","description":"The command line."}},"required":["cmd"]}}`)

// metadata returns the request metadata of a rollout with calls tool calls, at speed (the sim
// reads sim.speed, so a server started at another preset still runs at the bench's).
func metadata(calls int, speed sim.Speed) map[string]string {
	return map[string]string{sim.MetaCalls: strconv.Itoa(calls), sim.MetaSpeed: speed.String()}
}

var words = strings.Fields(`the of and to in is for on with that as by this from at be are was it not or
	handler request response queue buffer token context rollout session server client socket frame
	error retry timeout status config value result index cache store state item event stream
	func return if else range defer go chan select struct map string int bool nil err ctx len
	ok failed passed skipped warning info debug trace build test vet lint check run exec read write
	open close file line path module package import version commit branch merge diff patch`)

var dirs = []string{"internal/server", "session", "compat", "sampler", "protocol", "cmd/tether", "internal/bench", "docs"}

// toolOutput returns the output of tool call n (1-based) of rollout r, size bytes long (cut at
// a rune boundary, so it may be a few bytes shorter).
func toolOutput(r, n, size int) string {
	rng := rand.New(rand.NewPCG(uint64(r)+1, uint64(n)+0x9e3779b97f4a7c15))
	var b strings.Builder
	b.Grow(size + 128)
	b.WriteString("$ echo tether-call-")
	b.WriteString(strconv.Itoa(n))
	b.WriteString("\ntether-call-")
	b.WriteString(strconv.Itoa(n))
	b.WriteByte('\n')
	for b.Len() < size {
		b.WriteString(dirs[rng.IntN(len(dirs))])
		b.WriteString("/file_")
		b.WriteString(strconv.Itoa(rng.IntN(1000)))
		b.WriteString(".go:")
		b.WriteString(strconv.Itoa(1 + rng.IntN(900)))
		b.WriteString(": ")
		for w, nw := 0, 6+rng.IntN(8); w < nw; w++ {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		b.WriteByte('\n')
	}
	s := b.String()
	if len(s) > size {
		s = s[:size]
		for len(s) > 0 && !validTail(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// validTail reports whether s does not end inside a multi-byte character (the text is ASCII,
// so this only guards a future vocabulary).
func validTail(s string) bool { return s[len(s)-1] < 0x80 }

// call is a function call the server made in a turn.
type call struct {
	id   string
	item json.RawMessage // the function_call item as the server sent it
}

// newInput is what the client sends in one turn besides the request envelope: the first turn's
// user message, or one function_call_output per pending call.
type newInput struct {
	items []protocol.Item   // for the floor's tokenization
	wire  []json.RawMessage // the same items as JSON
}

func userInput() newInput {
	it := protocol.Item{Type: protocol.ItemMessage, Role: protocol.RoleUser,
		Content: []protocol.ContentPart{{Type: protocol.PartInputText, Text: userPrompt}}}
	w, _ := json.Marshal(map[string]string{"type": "message", "role": "user", "content": userPrompt})
	return newInput{items: []protocol.Item{it}, wire: []json.RawMessage{w}}
}

// outputsFor returns the function_call_outputs for calls; *n counts the rollout's calls.
func outputsFor(r int, n *int, calls []call, size int) newInput {
	var in newInput
	for _, c := range calls {
		*n++
		text := toolOutput(r, *n, size)
		in.items = append(in.items, protocol.Item{Type: protocol.ItemFunctionCallOutput, CallID: c.id, Output: text})
		w, _ := json.Marshal(struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
			Output string `json:"output"`
		}{"function_call_output", c.id, text})
		in.wire = append(in.wire, w)
	}
	return in
}

// joinRaw writes items as a JSON array.
func joinRaw(b []byte, items []json.RawMessage) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
