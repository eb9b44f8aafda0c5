package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

// shapes runs body once per shape: against the server (append) and through the proxy that
// drops the opt-in (public).
func shapes(t *testing.T, opts server.Options, body func(t *testing.T, c *client.Conn)) {
	for _, shape := range []client.Shape{client.ShapeAppend, client.ShapePublic} {
		t.Run(string(shape), func(t *testing.T) {
			_, base := servertest.Start(t, opts)
			if shape == client.ShapePublic {
				base, _ = stripProxy(t, base)
			}
			c := dial(t, base+"/v1", nil)
			if c.Shape() != shape {
				t.Fatalf("shape %s, want %s", c.Shape(), shape)
			}
			body(t, c)
		})
	}
}

func parallelCalls(input string, n string) client.CreateRequest {
	q := twoCalls(input)
	q.Metadata = map[string]string{"sim.parallel": n}
	return q
}

// TestRunParallelCalls: the two calls of one step run at the same time (each waits for the
// other to start), and both outputs reach the model.
func TestRunParallelCalls(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		var started sync.WaitGroup
		started.Add(2)
		n := 0
		var mu sync.Mutex
		tool := func(ctx context.Context, call client.Call) (string, error) {
			started.Done()
			started.Wait() // both calls must be running for either to return
			mu.Lock()
			defer mu.Unlock()
			n++
			return "out-" + call.CallID[len(call.CallID)-6:], nil
		}
		resp, err := c.Run(ctxT(t), parallelCalls("two at once", "2"), client.RunOptions{
			Tools: map[string]client.ToolFunc{"exec_command": tool}})
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		for _, it := range resp.Output {
			if it.Type == "function_call" {
				calls++
				if !strings.Contains(resp.OutputText(), "out-"+it.CallID[len(it.CallID)-6:]) {
					t.Errorf("answer lacks the output of %s: %q", it.CallID, resp.OutputText())
				}
			}
		}
		if calls != 2 || n != 2 {
			t.Fatalf("%d calls in the output, %d handler runs; want 2, 2", calls, n)
		}
	})
}

// TestRunToolErrors: a handler error and a per-call timeout become tool outputs.
func TestRunToolErrors(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		turn := 0
		tool := func(ctx context.Context, call client.Call) (string, error) {
			turn++
			if turn == 1 {
				return "", errBoom
			}
			<-ctx.Done() // the second call waits for its timeout
			return "", ctx.Err()
		}
		resp, err := c.Run(ctxT(t), twoCalls("errors please"), client.RunOptions{CallTimeout: 50 * time.Millisecond,
			Tools: map[string]client.ToolFunc{"exec_command": tool}})
		if err != nil {
			t.Fatal(err)
		}
		text := resp.OutputText()
		for _, want := range []string{"error: boom", "error: context deadline exceeded"} {
			if !strings.Contains(text, want) {
				t.Errorf("answer lacks %q: %q", want, text)
			}
		}
	})
}

// TestRunUnknownTool: a call of a tool without a handler gets an error output.
func TestRunUnknownTool(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		resp, err := c.Run(ctxT(t), parallelCalls("no handler", "1"), client.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.OutputText(), "unknown tool") {
			t.Errorf("answer %q", resp.OutputText())
		}
	})
}

// TestRunMaxTurns: one suspension more than MaxTurns cancels the rollout.
func TestRunMaxTurns(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		q := twoCalls("forever")
		q.Metadata = map[string]string{"sim.calls": "5"}
		turns := 0
		resp, err := c.Run(ctxT(t), q, client.RunOptions{MaxTurns: 2,
			Tools: map[string]client.ToolFunc{"exec_command": func(context.Context, client.Call) (string, error) {
				turns++
				return "ok", nil
			}}})
		if !errors.Is(err, client.ErrMaxTurns) {
			t.Fatalf("err %v, want ErrMaxTurns", err)
		}
		if turns != 2 || resp == nil || resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "cancelled" {
			t.Fatalf("%d turns, final %+v", turns, resp)
		}
		if calls := len(resp.Output); calls != 3 {
			t.Errorf("final output has %d items, want the 3 calls", calls)
		}
	})
}

// TestSeveralRollouts runs three rollouts on one connection at once.
func TestSeveralRollouts(t *testing.T) {
	shapes(t, server.Options{}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i, in := range []string{"alpha", "bravo", "charlie"} {
			wg.Go(func() {
				resp, err := c.Run(ctx, twoCalls(in), client.RunOptions{
					Tools: map[string]client.ToolFunc{"exec_command": func(_ context.Context, call client.Call) (string, error) {
						return in + " " + call.Arguments, nil
					}}})
				switch {
				case err != nil:
					errs[i] = err
				case resp.Status != "completed" || len(resp.Output) != 3:
					errs[i] = errors.New(in + ": final " + resp.Status)
				case strings.Count(resp.OutputText(), in) != 3:
					errs[i] = errors.New(in + ": answer " + resp.OutputText())
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	})
}
