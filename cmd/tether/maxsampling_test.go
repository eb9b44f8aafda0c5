package main

import (
	"io"
	"log/slog"
	"testing"
)

// TestMaxSamplingDefaults: -max-sampling 0 means no bound with the sim, -upstream-slots with
// -backend chat and defaultResponsesMaxSampling with -backend responses; a value set wins.
func TestMaxSamplingDefaults(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 0},
		{[]string{"-backend", "chat", "-upstream", "http://127.0.0.1:1/v1", "-upstream-slots", "3"}, 3},
		{[]string{"-backend", "responses", "-upstream", "ws://127.0.0.1:1/v1/responses"}, defaultResponsesMaxSampling},
		{[]string{"-backend", "responses", "-upstream", "ws://127.0.0.1:1/v1/responses", "-max-sampling", "5"}, 5},
	} {
		cfg, _, err := parseServe(t, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := serverOptions(cfg, log)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if opts.MaxSampling != tc.want {
			t.Errorf("%q: MaxSampling %d, want %d", tc.args, opts.MaxSampling, tc.want)
		}
	}
}
