// Command tether runs the Tether server and its tools.
//
//	tether serve [flags]   listen on 127.0.0.1:8787 and serve /v1/responses with the sim model
//	tether demo [flags]    run a 2-tool-call append-shape rollout and print its frames
//	tether conform [flags] run the conformance suite against a server (package conformance)
//	tether bench [flags]   one agent workload over http, http-prev, ws and append (package internal/bench)
//
// Every flag of serve (architecture §10) is also read from an environment variable
// TETHER_<FLAG> with '-' as '_' (TETHER_ADDR, TETHER_MODEL_SPEED, TETHER_MAX_FRAME, …); a flag
// on the command line wins. SIGINT or SIGTERM shut the server down gracefully: no rollout is
// left without its terminal event, then every WebSocket closes with 1001.
package main
