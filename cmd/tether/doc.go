// Command tether runs the Tether server and its tools.
//
//	tether serve [flags]   listen on 127.0.0.1:8787 and serve /v1/responses with the sim model
//	tether demo [flags]    run a 2-tool-call append-shape rollout and print its frames
//	tether conform [flags] run the conformance suite against a server (package conformance)
//	tether bench [flags]   one agent workload over http, http-prev, ws and append (package internal/bench)
//	tether soak [flags]    hold N connections of M-turn rollouts with chaos (package internal/soak)
//	tether version         the module version, VCS revision and Go version
//
// Flags are parsed by github.com/peterbourgon/ff/v3. Each flag of a command is also read from
// the environment variable TETHER_<COMMAND>_<FLAG> with '-' as '_' (TETHER_SERVE_ADDR,
// TETHER_BENCH_CALLS, …), then from the file named by -config ('flag value' lines); a flag on the
// command line wins over the environment, which wins over the file. A variable of one command
// does not change another; an unknown TETHER_<COMMAND>_… variable is an error. SIGINT or SIGTERM
// shut the server down gracefully: no rollout is left without its terminal event, then every
// WebSocket closes with 1001; a second signal ends the grace at once.
package main
