// Package redistest starts a real redis-server for tests: on a free loopback
// port, without persistence, stopped when the test ends. The binary is $TETHER_REDIS_SERVER,
// else redis-server on PATH; when it is missing the test is skipped, unless
// TETHER_REQUIRE_REDIS=1 (CI), which makes it fail.
package redistest
