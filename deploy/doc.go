// Package deploy holds deployment files and their tests: nginx.conf puts
// several `tether serve` instances sharing one Redis behind nginx. The tests run the real
// nginx (Debian package nginx; $TETHER_NGINX names the binary, TETHER_REQUIRE_NGINX=1 makes a
// missing one a failure) and a real redis-server in front of two in-process instances.
//
// TestRestartDrill runs the built binary three times behind nginx. While a
// load of resuming clients runs, it restarts each process with SIGTERM and kills one with
// SIGKILL. Its clients are raw JSON over github.com/coder/websocket. They check every rollout
// end to end through the sim's answer, which quotes each tool output once, in order.
// More clients run append-shape rollouts with the Go client package, which reattaches: the
// drill counts the rollouts a SIGTERM parked, checks that each resumed as the same Response,
// and how many resumed hot (cached_tokens covering the previous context);
// TETHER_DRILL_REATTACH=0 leaves them out. TETHER_DRILL_DURATION lengthens the drill, and
// TETHER_DRILL_LOGS=DIR keeps the instances' logs, at debug level (docs/deploy.md, "Restart
// drill").
package deploy
