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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "tether:", err)
		os.Exit(exitCode(err))
	}
}

// run dispatches a subcommand. ctx is cancelled by SIGINT/SIGTERM.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errUsage
	}
	switch args[0] {
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
	usage(stderr)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: tether <command> [flags]

Commands:
  serve   run the server (default 127.0.0.1:8787, the sim model)
  demo    run a 2-tool-call append-shape rollout against a server and print its frames
  conform run the conformance suite against a server (public and append shape)
  bench   run one agent workload over http, http-prev, ws and append and compare their overhead
  soak    hold N connections of M-turn rollouts in both shapes with chaos; verify items and resources
  attack  run the resource attacks of issue 15 against fresh servers; report peak RSS, /healthz, refusals

Run 'tether <command> -h' for the flags of a command. Every flag can also be set with an
environment variable TETHER_<FLAG> (e.g. TETHER_ADDR, TETHER_MODEL_SPEED).
`)
}
