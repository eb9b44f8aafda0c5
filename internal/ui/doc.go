// Package ui is tether serve -ui: a live demo page served by the server itself
// under /ui/, with a small JSON and SSE API beside it.
//
// # The race
//
// POST /ui/api/race starts a race (body RaceConfig; 202 with the RaceState). The race runs the
// bench's agent workload (package internal/bench) over the four transports against this same
// server, from the server process's client side, with the sim in real time at the chosen
// preset (metadata sim.speed: 65, 1000 or 4000 tokens/s): one bench.Run per transport, all at
// the same time, so that the page shows a race; their reports are merged with bench.Merge.
// Each lane runs one warm-up rollout of one call first. Because the lanes share the machine,
// the race is a demonstration; `tether bench` runs the transports one after another and is the
// measurement.
//
// Bounds: one race at a time (a second start gets 409 race_in_progress); a race ends failed
// after Options.RaceTimeout (default 3 minutes); calls 1..100 (default 20), rollouts 1..3
// (default 1), tool outputs 64 B..16 KiB (default 2 KiB); at most MaxStreams event streams.
//
// GET /ui/api/race/events streams the current race as Server-Sent Events, replaying the race's
// events from its start for a late subscriber, and ends after the last one:
//
//	race    the RaceState as it started
//	turn    TurnEvent: one turn (bench.TurnSample's keys) of one transport, as soon as it was
//	        measured; rollout 0 is the lane's warm-up. model_first_ms is the sim's time to the
//	        turn's first token, server_ms = overhead_ms − model_first_ms what the server and
//	        the transport added
//	lane    LaneEvent: one transport finished ("done") or failed
//	done    the final RaceState: "report" is the merged bench report (the keys of package
//	        internal/bench's JSON report), "svg" the bench's chart of it
//	error   {"message"}: the race failed (a lane failed, the timeout, or shutdown)
//
// GET /ui/api/race returns the running or last RaceState (404 before the first race).
//
// # The live view
//
// GET /ui/api/live returns Live: every connection the server serves (append and public
// WebSockets, and POSTs in progress) with its live rollouts (state sampling, suspended or
// queued; turns; tokens; ages), from server.Server.Snapshot. The page polls it every second.
//
// # Keys
//
// With API keys configured, every /ui/api/ route needs "Authorization: Bearer <key>" (the /v1
// check, server.Server.RequireKey) and answers 401 otherwise. The page itself (HTML, JS, CSS)
// holds nothing secret and is served without a key; the page has a key field, keeps the key
// in the tab's sessionStorage, and sends it as a Bearer header on every API call (the event
// stream is read with fetch, not EventSource, for that reason). The race's client sends the
// same key to /v1, so a race can only do what its caller could. Any valid key sees every
// connection in the live view, whichever key opened it: ids, states, token counts and client
// addresses, never items.
//
// # Decisions
//
//   - tether serve -ui rather than a separate tether demo -web: the live view needs the
//     server's own state, which only its process has.
//   - The page is static files embedded with embed, with no build step and no external
//     assets: it works offline and behind a firewall.
//   - While the race runs, the page draws its own chart from the turn events; when it ends the
//     page shows the bench's SVG of the merged report, the same chart as tether bench -svg.
package ui
