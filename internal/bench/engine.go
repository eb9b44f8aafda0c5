package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tetherd/tether/internal/chatwire"
)

// Engine mode: the server samples with a real model (its GET /v1/models does not list the sim,
// or Config.Model names another model). A real model does not call tools on request, so the
// workload does not rely on calls: every rollout has exactly K+1 turns; a turn that ended at
// complete tool calls is answered with their outputs, and any other turn is followed by a user
// message of the same size on the same chain (previous_response_id; on the append shape a new
// response.create with previous_response_id once the rollout has ended). Every request sets
// max_output_tokens and temperature 0. The engine transport drives the engine itself over
// Chat Completions with the whole message list each turn, as an agent does without Tether.

// defaultModel is the model the sim serves.
const defaultModel = "sim"

// followUp is the text of the user message that follows a turn without tool calls; the
// output of a check follows it.
const followUp = "Output of the next check:\n"

// engineTool is shellTool in Chat Completions form.
var engineTool = func() chatwire.Tool {
	var t struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(shellTool, &t); err != nil {
		panic(err)
	}
	return chatwire.Tool{Type: "function", Function: chatwire.ToolFunction{Name: t.Name, Description: &t.Description, Parameters: t.Parameters}}
}()

// detectModel asks the server's GET /v1/models: "sim" when it lists the sim (or does not
// answer the list), else the first model it lists.
func detectModel(ctx context.Context, hc *http.Client, base, apiKey string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: GET %s/v1/models: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return defaultModel, nil
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list); err != nil || len(list.Data) == 0 {
		return defaultModel, nil
	}
	for _, m := range list.Data {
		if m.ID == defaultModel {
			return defaultModel, nil
		}
	}
	return list.Data[0].ID, nil
}

// engineDriver drives the engine's POST /chat/completions directly (stream: true), the whole
// conversation each turn.
type engineDriver struct {
	client *http.Client
	url    string // …/v1/chat/completions
	apiKey string
}

func (d *engineDriver) close() {}

// engineCall is a tool call the engine streamed, assembled from its deltas.
type engineCall struct {
	id, name string
	args     strings.Builder
}

func (d *engineDriver) turn(ctx context.Context, payload []byte) (turnResult, error) {
	var res turnResult
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(payload))
	if err != nil {
		return res, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	// A chat completion may be sent again: with the key net/http resends it when the engine
	// closed a kept-alive connection before reading it (llama-server advertises keep-alive,
	// then closes after each streamed reply), as an agent's SDK retries.
	req.Header.Set("Idempotency-Key", rand.Text())
	if d.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.apiKey)
	}
	t0 := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		return res, fmt.Errorf("POST %s: %w", d.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return res, fmt.Errorf("POST %s: %s: %s", d.url, resp.Status, bytes.TrimSpace(body))
	}
	var (
		text   strings.Builder
		calls  []*engineCall
		finish string
		u      *chatwire.Usage
		tm     *chatwire.Timings
	)
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, rerr := br.ReadBytes('\n')
		data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:"))
		data = bytes.TrimSpace(data)
		if ok && string(data) == "[DONE]" {
			break
		}
		if ok && len(data) > 0 {
			var c chatwire.Chunk
			if err := json.Unmarshal(data, &c); err != nil {
				return res, fmt.Errorf("bad chunk %.200s: %w", data, err)
			}
			if c.Error != nil {
				return res, fmt.Errorf("engine error in the stream: %.500s", data)
			}
			res.events++
			if c.Usage != nil {
				u = c.Usage
			}
			if c.Timings != nil {
				tm = c.Timings
			}
			for _, ch := range c.Choices {
				if ch.Delta.Content != nil && *ch.Delta.Content != "" || len(ch.Delta.ToolCalls) > 0 {
					if res.overhead == 0 {
						res.overhead = time.Since(t0)
					}
				}
				if ch.Delta.Content != nil {
					text.WriteString(*ch.Delta.Content)
				}
				for _, tc := range ch.Delta.ToolCalls {
					i := len(calls) - 1
					if tc.Index != nil {
						i = *tc.Index
					}
					for i >= len(calls) {
						calls = append(calls, &engineCall{})
					}
					if i < 0 {
						return res, fmt.Errorf("tool call delta without a call: %.200s", data)
					}
					if tc.ID != "" {
						calls[i].id = tc.ID
					}
					if tc.Function.Name != "" {
						calls[i].name = tc.Function.Name
					}
					calls[i].args.WriteString(tc.Function.Arguments)
				}
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				break
			}
			return res, fmt.Errorf("read SSE: %w", rerr)
		}
	}
	res.total = time.Since(t0)
	_, _ = io.Copy(io.Discard, br)
	switch finish {
	case "stop", "tool_calls":
	case "length":
		res.incomplete = "max_output_tokens"
	case "":
		return res, errors.New("the stream ended without finish_reason")
	default:
		res.incomplete = finish
	}
	if u == nil {
		return res, errors.New("the stream had no usage (stream_options.include_usage)")
	}
	res.usage.Input, res.usage.Output = u.PromptTokens, u.CompletionTokens
	switch {
	case u.PromptTokensDetails != nil:
		res.usage.Details.Cached = u.PromptTokensDetails.CachedTokens
	case tm != nil:
		res.usage.Details.Cached = tm.CacheN
	}
	// The assistant message as the agent keeps it; calls only when the engine finished them
	// (a call cut off by max_tokens has partial arguments and is not run).
	msg := chatwire.Message{Role: "assistant"}
	if text.Len() > 0 {
		msg.Content = chatwire.TextContent(text.String())
	}
	if finish == "tool_calls" {
		for _, c := range calls {
			if c.id == "" || c.name == "" {
				return res, fmt.Errorf("a tool call without id or name (id %q, name %q)", c.id, c.name)
			}
			msg.ToolCalls = append(msg.ToolCalls, chatwire.ToolCall{ID: c.id, Type: "function",
				Function: chatwire.FunctionCall{Name: c.name, Arguments: c.args.String()}})
			res.calls = append(res.calls, call{id: c.id})
		}
	}
	if msg.Content == nil && len(msg.ToolCalls) == 0 {
		msg.Content = chatwire.TextContent("")
	}
	res.message = msg
	return res, nil
}

// chatURL is the chat completions endpoint under an engine's /v1 base.
func chatURL(base string) string { return strings.TrimRight(base, "/") + "/chat/completions" }

// engineRequest is the engine transport's request of one turn.
func (b *bencher) engineRequest(msgs []chatwire.Message) ([]byte, error) {
	maxTok, temp := b.cfg.MaxOutputTokens, 0.0
	return json.Marshal(chatwire.Request{Model: b.model, Messages: msgs, Tools: []chatwire.Tool{engineTool},
		MaxTokens: &maxTok, Temperature: &temp, Stream: true, StreamOptions: &chatwire.StreamOptions{IncludeUsage: true}})
}

// followUpInput is the user message that follows turn n's answer when it made no tool call:
// the same size of text as a tool output.
func followUpInput(r, n, size int) (text string, in newInput) {
	text = followUp + toolOutput(r, n, size)
	w, _ := json.Marshal(map[string]string{"type": "message", "role": "user", "content": text})
	return text, newInput{wire: []json.RawMessage{w}}
}

// engineRollout runs one rollout of exactly calls+1 turns over tc in engine mode (see the
// top of this file); rollout -1 is a warm-up. It returns one sample per turn.
func (b *bencher) engineRollout(ctx context.Context, tc *transportClient, rollout, calls int) ([]TurnSample, error) {
	d, err := b.driver(ctx, tc)
	if err != nil {
		return nil, err
	}
	defer d.close()
	seed := rollout
	if seed < 0 {
		seed = 1 << 20
	}
	tools := []json.RawMessage{shellTool}
	maxOut, temp := b.cfg.MaxOutputTokens, 0.0
	var (
		samples  []TurnSample
		history  []json.RawMessage  // http: the whole conversation so far
		msgs     []chatwire.Message // engine: the whole conversation so far
		prevID   string
		live     bool // append: the rollout on the socket is suspended (continue with response.append)
		nOut     int  // tool outputs and follow-ups sent so far
		in       = userInput()
		bytesPrv = tc.cnt.n.Load()
	)
	msgs = append(msgs, chatwire.Message{Role: "user", Content: chatwire.TextContent(userPrompt)})
	for turn := 1; turn <= calls+1; turn++ {
		var payload []byte
		var err error
		f := false
		create := request{Model: b.model, Input: joinRaw(nil, in.wire), Tools: tools, MaxOutputTokens: &maxOut, Temperature: &temp}
		switch tc.name {
		case Engine:
			payload, err = b.engineRequest(msgs)
		case HTTP:
			history = append(history, in.wire...)
			create.Input, create.Store, create.Stream = joinRaw(nil, history), &f, true
			payload, err = json.Marshal(create)
		case HTTPPrev:
			t := true
			create.PreviousResponseID, create.Store, create.Stream = prevID, &t, true
			payload, err = json.Marshal(create)
		case WS:
			create.Type, create.PreviousResponseID, create.Store = "response.create", prevID, &f
			payload, err = json.Marshal(create)
		case Append:
			if live {
				payload, err = json.Marshal(appendFrame{Type: "response.append", ResponseID: prevID, Input: joinRaw(nil, in.wire)})
			} else {
				create.Type, create.PreviousResponseID = "response.create", prevID
				payload, err = json.Marshal(create)
			}
		}
		if err != nil {
			return nil, err
		}
		b.prog.turn(tc.name, rollout, b.cfg.Rollouts, turn, calls+1)
		res, err := d.turn(ctx, payload)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", turn, err)
		}
		if res.incomplete != "" && res.incomplete != "max_output_tokens" {
			return nil, fmt.Errorf("turn %d: the response ended incomplete (%s): lower -tool-output or -calls, or give the engine more context", turn, res.incomplete)
		}
		if res.overhead == 0 { // the model wrote nothing: the whole turn was its first output
			res.overhead = res.total
		}
		s := TurnSample{
			Rollout: rollout + 1, Turn: turn,
			OverheadMS: ms(res.overhead), TurnMS: ms(res.total),
			FrameBytes: len(payload), BytesSent: tc.cnt.n.Load() - bytesPrv, ServerCPUMS: -1,
			InputTokens: res.usage.Input, CachedTokens: res.usage.Details.Cached, OutputTokens: res.usage.Output,
			Events: res.events, ToolCalls: len(res.calls),
		}
		s.PrefillTokens = s.InputTokens - s.CachedTokens
		bytesPrv = tc.cnt.n.Load()
		samples = append(samples, s)
		if b.cfg.OnTurn != nil {
			b.cfg.OnTurn(tc.name, s)
		}
		if turn == calls+1 {
			break
		}

		// The next turn's input: the outputs of the calls the turn ended at, else a follow-up.
		prevID = res.responseID
		live = tc.name == Append && res.suspended
		if tc.name == HTTP {
			history = append(history, keepOutput(res.output)...)
		}
		if tc.name == Engine {
			msgs = append(msgs, res.message)
		}
		if len(res.calls) > 0 {
			first := nOut
			in = outputsFor(seed, &nOut, res.calls, b.cfg.ToolOutputBytes)
			if tc.name == Engine {
				for i, c := range res.calls {
					msgs = append(msgs, chatwire.Message{Role: "tool", ToolCallID: c.id,
						Content: chatwire.TextContent(toolOutput(seed, first+i+1, b.cfg.ToolOutputBytes))})
				}
			}
			continue
		}
		nOut++
		var text string
		text, in = followUpInput(seed, nOut, b.cfg.ToolOutputBytes)
		if tc.name == Engine {
			msgs = append(msgs, chatwire.Message{Role: "user", Content: chatwire.TextContent(text)})
		}
	}
	return samples, nil
}

// keepOutput returns a Response's output items that a stateless client sends back as
// history: all but function calls cut off before they were complete (never run, so never
// answered).
func keepOutput(items []json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	for _, raw := range items {
		var it struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		}
		if json.Unmarshal(raw, &it) == nil && it.Type == "function_call" && it.Status == "incomplete" {
			continue
		}
		out = append(out, raw)
	}
	return out
}

// fmtTokens formats a token count per turn.
func fmtTokens(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// writeEngineTable is WriteTable in engine mode: measured times beside the engine's token
// counts, then the token counts turn by turn.
func (r *Report) writeEngineTable(w io.Writer, markdown bool) {
	wl := r.Workload
	srv := "server " + r.Server.URL
	if r.Server.Spawned {
		srv = fmt.Sprintf("spawned server (pid %d)", r.Server.PID)
	}
	base := HTTP
	if r.Server.Engine != "" {
		base = Engine
		srv += ", engine " + r.Server.Engine
	}
	fmt.Fprintf(w, "tether bench: model %s, %d rollout(s) × %d turns per transport, tool output %s, max_output_tokens %d, temperature 0, "+
		"%d tokens of context at the last turn; %s; %d CPUs, %s.\n\n",
		wl.Model, wl.Rollouts, wl.Turns, fmtBytes(float64(wl.ToolOutputBytes)), wl.MaxOutputTokens, wl.HistoryTokensEnd, srv,
		r.Machine.CPUs, r.Machine.GoVersion)
	x := "×" + base
	t := table{head: []string{"transport", "first output p50", "p90", x, "turn p50", "rollout", x,
		"input tok/turn", "prefill tok/turn", "cached tok/turn", "cached", "turns with calls", "bytes/turn"}}
	for _, tr := range r.Transports {
		turn := Stats{}
		if tr.TurnMS != nil {
			turn = *tr.TurnMS
		}
		t.add(tr.Name, fmtMS(tr.OverheadMS.P50), fmtMS(tr.OverheadMS.P90), fmtRatio(tr.OverheadRatio), fmtMS(turn.P50),
			fmtS(tr.RolloutS), fmtRatio(tr.RolloutRatio), fmtTokens(tr.InputTokensPerTurn), fmtTokens(tr.PrefillTokensPerTurn),
			fmtTokens(tr.CachedTokensPerTurn), fmt.Sprintf("%.0f%%", 100*tr.CachedFraction), fmt.Sprintf("%d/%d", tr.ToolCallTurns, tr.Turns),
			fmtBytes(tr.BytesPerTurn))
	}
	t.write(w, markdown)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "first output = request written → first output item (Tether) or first content/tool-call chunk (engine);")
	fmt.Fprintln(w, "turn = request written → the turn's last event; rollout = Σ turn times, mean over rollouts. Token counts")
	fmt.Fprintln(w, "are the engine's own (usage.prompt_tokens, prompt_tokens_details.cached_tokens or llama.cpp timings.cache_n;")
	fmt.Fprintln(w, "Tether passes them through); prefill = input − cached. A turn without tool calls is followed by a user message.")
	fmt.Fprintln(w)

	// Turn by turn: prefill / cached tokens, mean over rollouts.
	head := []string{"turn"}
	for _, tr := range r.Transports {
		head = append(head, tr.Name+" prefill/cached")
	}
	pt := table{head: head}
	for turn := 1; turn <= wl.Turns; turn++ {
		row := []string{strconv.Itoa(turn)}
		for _, tr := range r.Transports {
			var n, prefill, cached float64
			for _, s := range tr.PerTurn {
				if s.Turn == turn {
					n, prefill, cached = n+1, prefill+float64(s.PrefillTokens), cached+float64(s.CachedTokens)
				}
			}
			if n == 0 {
				row = append(row, "–")
				continue
			}
			row = append(row, fmtTokens(prefill/n)+" / "+fmtTokens(cached/n))
		}
		pt.add(row...)
	}
	pt.write(w, markdown)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "engine tokens per turn: prefill / cached, mean over rollouts.")
}
