package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tetherd/tether/internal/attack"
)

func main() {
	if base := os.Getenv(attack.ProbeEnv); base != "" {
		os.Exit(attack.RunProbe(base, os.Stdin, os.Stdout)) // started by tether attack
	}
	ctx := notifySignals()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		if errors.Is(err, errNoCommand) {
			os.Exit(2) // the usage says it all
		}
		fmt.Fprintln(os.Stderr, "tether:", err)
		os.Exit(exitCode(err))
	}
}

// notifySignals returns a context cancelled by the first SIGINT/SIGTERM; the second cancels
// its force context (see withForce); a third one kills the process as usual.
func notifySignals() context.Context {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := context.WithCancel(context.Background())
	force, forceStop := context.WithCancel(context.Background())
	go func() {
		<-sigs
		stop()
		<-sigs
		signal.Stop(sigs)
		forceStop()
	}()
	return withForce(ctx, force.Done())
}

type forceKey struct{}

// withForce attaches force to ctx: closed when the command should stop at once (for serve: end
// the shutdown grace), after ctx was cancelled.
func withForce(ctx context.Context, force <-chan struct{}) context.Context {
	return context.WithValue(ctx, forceKey{}, force)
}

// forced returns ctx's force channel (nil, never closed, if it has none).
func forced(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(forceKey{}).(<-chan struct{})
	return ch
}

// run dispatches a subcommand. ctx is cancelled by SIGINT/SIGTERM.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errNoCommand
	}
	switch args[0] {
	case "version", "-version", "--version":
		return version(args[1:], stdout, stderr)
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "conform":
		return conform(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "soak":
		return soakCmd(ctx, args[1:], stdout, stderr)
	case "attack":
		return attackCmd(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		usage(stdout)
		return nil
	}
	fmt.Fprintf(stderr, "tether: unknown command %q%s\n\n", args[0], didYouMean(args[0], commands))
	usage(stderr)
	return fmt.Errorf("%w: unknown command %q%s", errUsage, args[0], didYouMean(args[0], commands))
}

// commands are the subcommands run dispatches, for "did you mean".
var commands = []string{"serve", "demo", "conform", "bench", "soak", "version", "attack", "help"}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: tether <command> [flags]

Commands:
  serve   run the server (default 127.0.0.1:8787, the sim model)
  demo    run a 2-tool-call append-shape rollout against a server and print its frames
  conform run the conformance suite against a server (public and append shape)
  bench   run one agent workload over http, http-prev, ws and append and compare their overhead
  soak    hold N connections of M-turn rollouts in both shapes with chaos; verify items and resources
  attack  run resource attacks (huge frames, slow bodies, many connections) against fresh servers;
          report peak RSS, /healthz latency and what was refused
  version print the module version, VCS revision and Go version (also: tether -version)

Run 'tether <command> -h' for the flags of a command. Every flag can also be set with an
environment variable TETHER_<COMMAND>_<FLAG> (e.g. TETHER_SERVE_ADDR, TETHER_BENCH_CALLS) or
in a file named by -config; a flag on the command line wins over the environment, which wins
over the file.
`)
}
