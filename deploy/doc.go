// Package deploy holds deployment files and their tests (issue 10 §3): nginx.conf puts
// several `tether serve` instances sharing one Redis behind nginx. The tests run the real
// nginx (Debian package nginx; $TETHER_NGINX names the binary, TETHER_REQUIRE_NGINX=1 makes a
// missing one a failure) and a real redis-server in front of two in-process instances.
package deploy
