package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tetherd/tether/client"
)

// demo runs a 2-tool-call append-shape rollout against a server with package client and
// prints its frames.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "Run a 2-tool-call append-shape rollout against a server with package client and print its frames.", stderr)
	rawURL := fs.String("url", "http://127.0.0.1:8787/v1", urlForms)
	calls := fs.Int("calls", 2, "sequential tool calls the sim model makes (metadata sim.calls; sent only with -model sim)")
	model := fs.String("model", "sim", "the model of the request (in front of an engine: one of its models, see GET /v1/models)")
	maxOutput := fs.Int("max-output-tokens", 0, "max_output_tokens of the request (0: the server's default); a real model may otherwise write until its context is full")
	verbose := fs.Bool("v", false, "print every frame in full")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	apiKey := fs.String("api-key", "", "API key sent as Authorization: Bearer")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *maxOutput < 0 {
		return fmt.Errorf("%w: demo: -max-output-tokens: want 0 or more, got %d", errUsage, *maxOutput)
	}
	su, err := parseServerURL("-url", *rawURL)
	if err != nil {
		return err
	}
	url := su.WebSocket()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := client.Dial(ctx, url, &client.Options{APIKey: *apiKey, Trace: func(sent bool, frame []byte) {
		if sent {
			fmt.Fprintf(stdout, "→ %s\n", clip(string(frame), *verbose))
		}
	}})
	if err != nil {
		return dialError(url, err)
	}
	defer c.Close()
	if c.Shape() == client.ShapeAppend {
		fmt.Fprintf(stdout, "connected to %s (OpenAI-Beta: %s)\n", c.URL(), client.AppendBeta)
	} else {
		fmt.Fprintf(stdout, "connected to %s (public shape: the server did not confirm the append opt-in)\n", c.URL())
	}
	req := client.CreateRequest{
		Model:           *model,
		Input:           []client.Item{client.UserMessage("List the files in the repository, then count the lines of README.md.")},
		Tools:           []client.Tool{shellTool},
		MaxOutputTokens: *maxOutput,
	}
	if *model == "sim" {
		req.Metadata = map[string]string{"sim.calls": fmt.Sprint(*calls)}
	}
	r, err := c.Start(ctx, req)
	if err != nil {
		return err
	}
	return demoLoop(ctx, r, stdout, *verbose)
}

// dialError explains a failed dial: a refused key, another refusal by the server, or no
// server at all.
func dialError(url string, err error) error {
	ce, ok := client.AsError(err)
	switch {
	case ok && (ce.Status == http.StatusUnauthorized || ce.Status == http.StatusForbidden):
		return fmt.Errorf("connect %s: the server refused the API key (%d %s: %s); pass the key with -api-key KEY or TETHER_DEMO_API_KEY",
			url, ce.Status, ce.Code, ce.Message)
	case ok && ce.Status != 0:
		return fmt.Errorf("connect %s: the server answered the upgrade with %d %s: %s", url, ce.Status, ce.Code, ce.Message)
	}
	return fmt.Errorf("connect %s: %w (is 'tether serve' running?)", url, err)
}

var shellTool = client.FunctionTool("exec_command", "Run a shell command.", map[string]any{
	"type":       "object",
	"properties": map[string]any{"cmd": map[string]any{"type": "string"}},
	"required":   []string{"cmd"},
})

// demoLoop prints the rollout's events and answers each suspension with made-up outputs. A
// rollout that does not end completed (incomplete or failed) is an error that says why.
func demoLoop(ctx context.Context, r *client.Rollout, stdout io.Writer, verbose bool) error {
	for {
		for ev, err := range r.Events(ctx) {
			if err != nil {
				return fmt.Errorf("rollout: %w", err)
			}
			printEvent(stdout, ev, verbose)
		}
		s := r.Suspension()
		if s == nil {
			break
		}
		outputs := make([]client.Item, len(s.Calls))
		for i, call := range s.Calls {
			outputs[i] = call.Output("ran " + call.Arguments + ": ok")
		}
		fmt.Fprintf(stdout, "   ... suspended; the client runs %d tool call(s) and appends the output\n", len(outputs))
		if err := r.Append(ctx, outputs...); err != nil {
			return err
		}
	}
	resp := r.Response()
	if text := resp.OutputText(); text != "" {
		fmt.Fprintf(stdout, "\nanswer:\n%s\n", text)
	}
	usage, _ := json.Marshal(resp.Usage)
	fmt.Fprintf(stdout, "\n%s %s, usage %s\n", resp.ID, resp.Status, usage)
	switch {
	case resp.Status == "completed":
		return nil
	case resp.IncompleteDetails != nil && resp.IncompleteDetails.Reason != "":
		return fmt.Errorf("rollout %s ended %s: %s", resp.ID, resp.Status, resp.IncompleteDetails.Reason)
	case resp.Error != nil:
		return fmt.Errorf("rollout %s ended %s: %s: %s", resp.ID, resp.Status, resp.Error.Code, resp.Error.Message)
	}
	return fmt.Errorf("rollout %s ended %s", resp.ID, resp.Status)
}

func printEvent(w io.Writer, ev client.Event, verbose bool) {
	if !verbose && strings.HasSuffix(ev.Type, ".delta") {
		return
	}
	s := "-"
	if ev.SequenceNumber >= 0 {
		s = fmt.Sprint(ev.SequenceNumber)
	}
	fmt.Fprintf(w, "← [%s] %s\n", s, clip(string(ev.Raw), verbose))
}

func clip(s string, verbose bool) string {
	if verbose || len(s) <= 160 {
		return s
	}
	return s[:157] + "..."
}
