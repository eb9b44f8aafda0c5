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
	"github.com/tetherd/tether/internal/server"
)

// attackCmd runs `tether attack`: the resource attacks of package attack, each against a fresh
// `tether serve` child, with a table of peak RSS, /healthz latency and outcomes.
func attackCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("attack", "Run resource attacks (huge tool descriptions, many tiny items, idle and stalled connections, one key starving another), each against a fresh 'tether serve' child, and print peak RSS, /healthz latency and what was refused. docs/limits.md lists the attacks.", stderr)
	exe := fs.String("exe", "", "tether binary to start as the server (default: this one)")
	scale := fs.Float64("scale", 0.25, "multiplies each attack's connection and request counts (1 = the full counts of docs/limits.md)")
	names := fs.String("attacks", "all", "comma-separated attacks to run, or all: "+strings.Join(attack.Names, ", "))
	hold := fs.Duration("hold", 5*time.Second, "how long an attack keeps its connections after sending")
	sizes := fs.Float64("size-scale", 1, "multiplies each attack's frame and body sizes")
	serveArgs := fs.String("serve-args", "", "extra flags for the server, space-separated (e.g. \"-max-memory 1GiB\")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: attack takes no arguments, got %q", errUsage, fs.Args())
	}
	list, err := attackList(*names)
	if err != nil {
		return err
	}
	budget, err := attackBudget(strings.Fields(*serveArgs))
	if err != nil {
		return err
	}
	results, err := attack.Run(ctx, attack.Config{Exe: *exe, Scale: *scale, Attacks: list,
		Hold: *hold, SizeScale: *sizes, ServeArgs: strings.Fields(*serveArgs), Budget: budget}, stderr)
	printAttack(stdout, results)
	return err
}

// attackList parses -attacks: "all", or names from attack.Names separated by commas.
func attackList(names string) ([]string, error) {
	if strings.TrimSpace(names) == "all" {
		return attack.Names, nil
	}
	var list []string
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(attack.Names, n) {
			return nil, fmt.Errorf("%w: -attacks: unknown attack %q (want all, or some of %s)", errUsage, n, strings.Join(attack.Names, ", "))
		}
		list = append(list, n)
	}
	return list, nil
}

// attackBudget is the -max-memory of the servers an attack starts: the last one in serveArgs,
// else the default of this machine.
func attackBudget(serveArgs []string) (int64, error) {
	budget := server.DefaultMaxMemory()
	for i, a := range serveArgs {
		v, ok := "", false
		switch {
		case a == "-max-memory" || a == "--max-memory":
			if i+1 < len(serveArgs) {
				v, ok = serveArgs[i+1], true
			}
		case strings.HasPrefix(a, "-max-memory="), strings.HasPrefix(a, "--max-memory="):
			_, v, ok = strings.Cut(a, "=")
		}
		if !ok {
			continue
		}
		n, err := parseBytes(v)
		if err != nil {
			return 0, fmt.Errorf("%w: -serve-args: -max-memory: %v", errUsage, err)
		}
		budget = n
	}
	return budget, nil
}

func printAttack(w io.Writer, rs []attack.Result) {
	fmt.Fprintln(w, "| attack | peak RSS / budget | RSS at end | /healthz p50 / p99 / max | /healthz failed | victim 200 | outcomes | note |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --: | --: | --- | --- |")
	for _, r := range rs {
		var outs []string
		for k, v := range r.Outcomes {
			outs = append(outs, fmt.Sprintf("%s ×%d", k, v))
		}
		sort.Strings(outs)
		budget := "?"
		if r.Budget > 0 {
			budget = fmt.Sprintf("%s (%.0f%%)", mibs(r.Budget), 100*float64(r.PeakRSS)/float64(r.Budget))
		}
		fmt.Fprintf(w, "| %s | %s / %s | %s | %v / %v / %v | %d | %d/%d | %s | %s |\n", r.Name, mibs(r.PeakRSS), budget, mibs(r.EndRSS),
			r.HealthzP50.Round(time.Millisecond), r.HealthzP99.Round(time.Millisecond), r.HealthzMax.Round(time.Millisecond), r.HealthzFailed,
			r.VictimOK, r.VictimTotal, strings.Join(outs, ", "), r.Note)
	}
}

// mibs writes n bytes in MiB, rounded.
func mibs(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
