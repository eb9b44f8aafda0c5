package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestFlagRanges runs each subcommand with a numeric flag out of its range: the command fails
// with a usage error naming the flag, the value and the range, before it does anything. Each
// subcommand's last restricted flag (in name order) is among the cases, so a numeric flag
// without a range or a default outside its range in any subcommand fails this test too
// (checkRanges reports missing ranges first and checks values in name order).
func TestFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  [2]string
		want string
	}{
		{args: []string{"bench", "-calls", "-5"}, want: "bench: -calls -5 is out of range: want from 1 to 1000000"},
		{args: []string{"bench", "-calls", "0"}, want: "-calls 0 is out of range"},
		{args: []string{"bench"}, env: [2]string{"TETHER_BENCH_CALLS", "0"}, want: "-calls 0 is out of range"},
		{args: []string{"bench", "-rollouts", "0"}, want: "-rollouts 0 is out of range"},
		{args: []string{"bench", "-timeout", "-1s"}, want: "-timeout -1s is out of range: want greater than 0"},
		{args: []string{"bench", "-tool-output", "0"}, want: "-tool-output 0 is out of range: want at least 1"},
		{args: []string{"soak", "-connections", "1"}, want: "-connections 1 is out of range: want from 2 to"},
		{args: []string{"soak", "-duration", "0s"}, want: "-duration 0s is out of range"},
		{args: []string{"soak", "-lanes", "33"}, want: "-lanes 33 is out of range: want from 0 to 32"},
		{args: []string{"soak", "-turns", "0"}, want: "-turns 0 is out of range"},
		{args: []string{"conform", "-timeout", "-1s"}, want: "conform: -timeout -1s is out of range"},
		{args: []string{"demo", "-calls", "-1"}, want: "demo: -calls -1 is out of range"},
		{args: []string{"demo", "-timeout", "-1s"}, want: "-timeout -1s is out of range"},
		{args: []string{"attack", "-scale", "0"}, want: "attack: -scale 0 is out of range: want greater than 0"},
		{args: []string{"attack", "-size-scale", "NaN"}, want: "-size-scale NaN is out of range"},
		{args: []string{"serve", "-queue-depth", "0"}, want: "serve: -queue-depth 0 is out of range"},
		{args: []string{"serve", "-max-frame", "100"}, want: "-max-frame 100 is out of range: want at least 1KiB"},
		{args: []string{"serve", "-max-connections", "-1"}, want: "-max-connections -1 is out of range: want at least 0 (0: no cap)"},
		{args: []string{"serve", "-keepalive", "0s"}, want: "-keepalive 0s is out of range: want greater than 0, or negative (negative: none)"},
		{args: []string{"serve", "-slots", "0"}, want: "-slots 0 is out of range"},
		{args: []string{"serve", "-write-timeout", "0"}, want: "-write-timeout 0s is out of range"},
		{args: []string{"serve", "-park-after", "-1s"}, want: "-park-after -1s is out of range: want at least 0 (0: never park)"},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.env[0], func(t *testing.T) {
			if tc.env[0] != "" {
				t.Setenv(tc.env[0], tc.env[1])
			}
			err := run(t.Context(), tc.args, io.Discard, io.Discard)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a usage error containing %q", err, tc.want)
			}
		})
	}
}

// TestFlagRangesAccept checks values at the edges of their ranges and the "none" values that
// flags document.
func TestFlagRangesAccept(t *testing.T) {
	for _, args := range [][]string{
		{"-queue-depth", "1", "-max-connections", "0", "-keepalive", "-1s", "-shutdown-grace", "0", "-max-memory", "0"},
		{"-keepalive", "1ms", "-max-frame", "1KiB", "-slots", "4096", "-upstream-slots", "0"},
	} {
		if _, _, err := parseServe(t, args...); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}
