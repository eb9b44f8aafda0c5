package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tetherd/tether/client"
	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/session"
)

// TestManyRollouts runs 16 rollouts of 3 steps with 2 parallel calls each on one connection at
// once: every event and every error must reach its own rollout.
func TestManyRollouts(t *testing.T) {
	shapes(t, server.Options{Limits: session.Limits{QueueDepth: 64}}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			in := fmt.Sprintf("rollout-%02d", i)
			wg.Go(func() {
				q := twoCalls(in)
				q.Metadata = map[string]string{"sim.calls": "3", "sim.parallel": "2"}
				resp, err := c.Run(ctx, q, client.RunOptions{
					Tools: map[string]client.ToolFunc{"exec_command": func(_ context.Context, call client.Call) (string, error) {
						return in, nil
					}}})
				switch {
				case err != nil:
					errs[i] = fmt.Errorf("%s: %w", in, err)
				case resp.Status != "completed" || len(resp.Output) != 7:
					errs[i] = fmt.Errorf("%s: final %s %d", in, resp.Status, len(resp.Output))
				case strings.Count(resp.OutputText(), in) != 7:
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

// TestManyRejectedAppends: 16 rollouts on one connection each send a rejected append and then a
// good one; each error names its own bad call_id, so it reaches its own rollout.
func TestManyRejectedAppends(t *testing.T) {
	shapes(t, server.Options{Limits: session.Limits{QueueDepth: 64}}, func(t *testing.T, c *client.Conn) {
		ctx := ctxT(t)
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for i := range errs {
			in := fmt.Sprintf("rollout-%02d", i)
			wg.Go(func() {
				r, err := c.Start(ctx, parallelCalls(in, "1"))
				if err != nil {
					errs[i] = err
					return
				}
				for _, err := range r.Events(ctx) {
					if err != nil {
						errs[i] = fmt.Errorf("%s: %w", in, err)
						return
					}
				}
				s := r.Suspension()
				if err := r.Append(ctx, client.Call{CallID: "call_bad_" + in[8:]}.Output("x")); err != nil {
					errs[i] = err
					return
				}
				var got error
				for _, err := range r.Events(ctx) {
					got = err
				}
				if e, ok := client.AsError(got); !ok || !strings.Contains(e.Message, "call_bad_"+in[8:]) {
					errs[i] = fmt.Errorf("%s: bad append got %v", in, got)
					return
				}
				if err := r.Append(ctx, s.Calls[0].Output(in)); err != nil {
					errs[i] = err
					return
				}
				for _, err := range r.Events(ctx) {
					if err != nil {
						errs[i] = fmt.Errorf("%s: %w", in, err)
						return
					}
				}
				if resp := r.Response(); resp == nil || !strings.Contains(resp.OutputText(), in) {
					errs[i] = fmt.Errorf("%s: final %+v", in, resp)
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	})
}
