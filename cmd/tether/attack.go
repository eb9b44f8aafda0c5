package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tetherd/tether/internal/attack"
)

// attackCmd runs `tether attack`: the resource attacks of package attack, each against a fresh
// `tether serve` child, with a table of peak RSS, /healthz latency and outcomes.
func attackCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("attack", "Run resource attacks (huge tool descriptions, many tiny items, idle and stalled connections, one key starving another), each against a fresh 'tether serve' child, and print peak RSS, /healthz latency and what was refused. docs/limits.md lists the attacks.", stderr)
	exe := fs.String("exe", "", "tether binary to start as the server (default: this one)")
	scale := fs.Float64("scale", 0.25, "multiplies each attack's connection and request counts (1 = the full counts of docs/limits.md)")
	names := fs.String("attacks", strings.Join(attack.Names, ", "), "comma-separated attacks to run")
	hold := fs.Duration("hold", 5*time.Second, "how long an attack keeps its connections after sending")
	sizes := fs.Float64("size-scale", 1, "multiplies each attack's frame and body sizes")
	serveArgs := fs.String("serve-args", "", "extra flags for the server, space-separated (e.g. \"-max-memory 1GiB\")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: attack takes no arguments, got %q", errUsage, fs.Args())
	}
	for _, n := range strings.Split(*names, ",") {
		if !slices.Contains(attack.Names, n) {
			return fmt.Errorf("%w: -attacks: unknown attack %q (want some of %s)", errUsage, n, strings.Join(attack.Names, ","))
		}
	}
	results, err := attack.Run(ctx, attack.Config{Exe: *exe, Scale: *scale, Attacks: strings.Split(*names, ","),
		Hold: *hold, SizeScale: *sizes, ServeArgs: strings.Fields(*serveArgs)}, stderr)
	printAttack(stdout, results)
	return err
}

func printAttack(w io.Writer, rs []attack.Result) {
	fmt.Fprintln(w, "| attack | peak RSS | RSS at end | /healthz p50 / max | /healthz failed | outcomes | note |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --- | --- |")
	for _, r := range rs {
		var outs []string
		for k, v := range r.Outcomes {
			outs = append(outs, fmt.Sprintf("%s ×%d", k, v))
		}
		sort.Strings(outs)
		fmt.Fprintf(w, "| %s | %s | %s | %v / %v | %d | %s | %s |\n", r.Name, formatBytes(r.PeakRSS), formatBytes(r.EndRSS),
			r.HealthzP50.Round(time.Millisecond), r.HealthzMax.Round(time.Millisecond), r.HealthzFailed, strings.Join(outs, ", "), r.Note)
	}
}
