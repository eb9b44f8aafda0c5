package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/tetherd/tether/internal/server"
)

// demo runs a 2-tool-call append-shape rollout against a server and prints its frames.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "Run a 2-tool-call append-shape rollout against a server and print its frames.", stderr)
	rawURL := fs.String("url", "http://127.0.0.1:8787/v1", urlForms)
	calls := fs.Int("calls", 2, "sequential tool calls the sim model makes (metadata sim.calls)")
	verbose := fs.Bool("v", false, "print every frame in full")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	su, err := parseServerURL("-url", *rawURL)
	if err != nil {
		return err
	}
	url := su.WebSocket()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	h := http.Header{}
	h.Set("OpenAI-Beta", server.AppendBeta)
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return fmt.Errorf("connect %s: %w (is 'tether serve' running?)", url, err)
	}
	defer c.CloseNow()
	c.SetReadLimit(-1)
	fmt.Fprintf(stdout, "connected to %s (OpenAI-Beta: %s)\n", url, resp.Header.Get("OpenAI-Beta"))
	create := map[string]any{
		"type":     "response.create",
		"model":    "sim",
		"input":    "List the files in the repository, then count the lines of README.md.",
		"tools":    []any{shellTool},
		"metadata": map[string]string{"sim.calls": fmt.Sprint(*calls)},
	}
	if err := send(ctx, c, stdout, create, *verbose); err != nil {
		return err
	}
	return demoLoop(ctx, c, stdout, *verbose)
}

var shellTool = map[string]any{
	"type": "function", "name": "exec_command", "description": "Run a shell command.",
	"parameters": map[string]any{"type": "object",
		"properties": map[string]any{"cmd": map[string]any{"type": "string"}},
		"required":   []string{"cmd"}},
}

func demoLoop(ctx context.Context, c *websocket.Conn, stdout io.Writer, verbose bool) error {
	var calls = map[string]string{} // call_id → arguments
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		var ev struct {
			Type           string          `json:"type"`
			Seq            *int            `json:"sequence_number"`
			ResponseID     string          `json:"response_id"`
			PendingCallIDs []string        `json:"pending_call_ids"`
			Item           json.RawMessage `json:"item"`
			Delta          string          `json:"delta"`
			Response       struct {
				ID     string `json:"id"`
				Status string `json:"status"`
				Output []struct {
					Type    string `json:"type"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"output"`
				Usage json.RawMessage `json:"usage"`
			} `json:"response"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("bad frame %q: %w", data, err)
		}
		printFrame(stdout, ev.Type, ev.Seq, data, verbose)
		switch ev.Type {
		case "response.output_item.done":
			var it struct{ Type, CallID, Arguments string }
			var raw map[string]any
			_ = json.Unmarshal(ev.Item, &raw)
			it.Type, _ = raw["type"].(string)
			it.CallID, _ = raw["call_id"].(string)
			it.Arguments, _ = raw["arguments"].(string)
			if it.Type == "function_call" {
				calls[it.CallID] = it.Arguments
			}
		case "response.done":
			var input []any
			for _, id := range ev.PendingCallIDs {
				out := "ran " + calls[id] + ": ok"
				input = append(input, map[string]any{"type": "function_call_output", "call_id": id, "output": out})
			}
			fmt.Fprintf(stdout, "   ... suspended; the client runs %d tool call(s) and appends the output\n", len(input))
			if err := send(ctx, c, stdout, map[string]any{"type": "response.append", "response_id": ev.ResponseID, "input": input}, verbose); err != nil {
				return err
			}
		case "response.completed", "response.incomplete", "response.failed":
			for _, o := range ev.Response.Output {
				if o.Type == "message" && len(o.Content) > 0 {
					fmt.Fprintf(stdout, "\nanswer:\n%s\n", o.Content[0].Text)
				}
			}
			fmt.Fprintf(stdout, "\n%s %s, usage %s\n", ev.Response.ID, ev.Response.Status, ev.Response.Usage)
			_ = c.Close(websocket.StatusNormalClosure, "demo done")
			return nil
		case "error":
			return fmt.Errorf("server error: %s", data)
		}
	}
}

func send(ctx context.Context, c *websocket.Conn, stdout io.Writer, v any, verbose bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "→ %s\n", clip(string(b), verbose))
	return c.Write(ctx, websocket.MessageText, b)
}

func printFrame(w io.Writer, typ string, seq *int, data []byte, verbose bool) {
	if !verbose && (strings.HasSuffix(typ, ".delta")) {
		return
	}
	s := "-"
	if seq != nil {
		s = fmt.Sprint(*seq)
	}
	fmt.Fprintf(w, "← [%s] %s\n", s, clip(string(data), verbose))
}

func clip(s string, verbose bool) string {
	if verbose || len(s) <= 160 {
		return s
	}
	return s[:157] + "..."
}
