package client_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/tetherd/tether/client"
)

// The examples run against the Tether server that TestMain starts (exampleURL); with a server
// of your own, use its base URL, for example "http://127.0.0.1:8787/v1".

// Run an agent loop: Run starts the rollout, runs each tool call with its handler, appends
// the outputs and returns the final Response.
func ExampleConn_Run() {
	ctx := context.Background()
	c, err := client.Dial(ctx, exampleURL, &client.Options{APIKey: "sk-local"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	weather := client.FunctionTool("get_weather", "Current weather.", map[string]any{
		"type":       "object",
		"properties": map[string]any{"location": map[string]any{"type": "string"}},
		"required":   []string{"location"},
	})
	resp, err := c.Run(ctx, client.CreateRequest{
		Model: "sim",
		Input: []client.Item{client.UserMessage("Weather in Paris?")},
		Tools: []client.Tool{weather},
	}, client.RunOptions{Tools: map[string]client.ToolFunc{
		"get_weather": func(ctx context.Context, call client.Call) (string, error) {
			return "18C, light rain", nil // call.Arguments is {"location":"Paris"}
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("shape:", c.Shape())
	fmt.Println("status:", resp.Status, "items:", len(resp.Output))
	fmt.Println(firstLines(resp.OutputText(), 2))
	// Output:
	// shape: append
	// status: completed items: 2
	// user: "Weather in Paris?"
	// tool: "18C, light rain"
}

// Drive a rollout by hand: Events iterates up to the next suspension or the end; Suspension
// lists the pending calls; Append sends their outputs.
func ExampleRollout_Events() {
	ctx := context.Background()
	c, err := client.Dial(ctx, exampleURL, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	r, err := c.Start(ctx, client.CreateRequest{
		Model: "sim",
		Input: []client.Item{client.UserMessage("List the files.")},
		Tools: []client.Tool{client.FunctionTool("exec_command", "Run a shell command.",
			map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}},
				"required": []string{"cmd"}})},
	})
	if err != nil {
		log.Fatal(err)
	}
	for {
		for ev, err := range r.Events(ctx) {
			if err != nil {
				log.Fatal(err) // a *client.Error for a rejected frame
			}
			if !strings.HasSuffix(ev.Type, ".delta") {
				fmt.Println(ev.Type)
			}
		}
		s := r.Suspension()
		if s == nil {
			break // ended
		}
		var outputs []client.Item
		for _, call := range s.Calls {
			fmt.Println("  run", call.Name, call.Arguments)
			outputs = append(outputs, call.Output("README.md go.mod"))
		}
		if err := r.Append(ctx, outputs...); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(r.Response().Status, r.Usage().InputTokensDetails.CachedTokens > 0)
	// Output:
	// response.created
	// response.in_progress
	// response.output_item.added
	// response.function_call_arguments.done
	// response.output_item.done
	// response.done
	//   run exec_command {"cmd":"echo tether-call-1"}
	// response.output_item.added
	// response.content_part.added
	// response.output_text.done
	// response.content_part.done
	// response.output_item.done
	// response.completed
	// completed true
}

// Errors the server sends are *client.Error values with the API error object's fields.
func ExampleError() {
	ctx := context.Background()
	c, err := client.Dial(ctx, exampleURL, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	r, err := c.Start(ctx, client.CreateRequest{Model: "sim", Extra: map[string]any{"background": true}})
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range r.Events(ctx) {
		if e, ok := client.AsError(err); ok {
			fmt.Println(e.Status, e.Code, e.Param)
		}
	}
	// Output:
	// 400 unsupported_parameter background
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// The same loop over the public shape, as against a server that does not confirm the append
// opt-in (here forced with PublicShape): each stop at tool calls is a Response of its own, and
// the client continues with previous_response_id. The final Response is merged over them.
func Example_publicShape() {
	ctx := context.Background()
	c, err := client.Dial(ctx, exampleURL, &client.Options{PublicShape: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	responses := 0
	resp, err := c.Run(ctx, client.CreateRequest{
		Model:    "sim",
		Input:    []client.Item{client.UserMessage("Run two commands.")},
		Tools:    []client.Tool{client.FunctionTool("exec_command", "Run a shell command.", map[string]any{"type": "object"})},
		Metadata: map[string]string{"sim.calls": "2"},
	}, client.RunOptions{
		Tools: map[string]client.ToolFunc{"exec_command": func(ctx context.Context, call client.Call) (string, error) {
			return "ok", nil
		}},
		OnEvent: func(ev client.Event) {
			if ev.Type == "response.created" {
				responses++
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("shape:", c.Shape())
	fmt.Println("responses:", responses, "final output items:", len(resp.Output), "status:", resp.Status)
	fmt.Println("continued from the previous segment:", resp.PreviousResponseID != "")
	// Output:
	// shape: public
	// responses: 3 final output items: 3 status: completed
	// continued from the previous segment: true
}
