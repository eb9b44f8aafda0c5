package deploy

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/server"
	"github.com/tetherd/tether/internal/servertest"
)

// TestNginxConfHealthzBodies checks that nginx.conf quotes the bodies /healthz really answers:
// before and during a drain. It needs no nginx.
func TestNginxConfHealthzBodies(t *testing.T) {
	conf, err := os.ReadFile("nginx.conf")
	if err != nil {
		t.Fatal(err)
	}
	srv, base := servertest.Start(t, server.Options{})
	get := func() (int, string) {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	code, ok := get()
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	dcode, draining := get()
	if code != 200 || dcode != 503 {
		t.Fatalf("/healthz: %d %s, then %d %s while draining", code, ok, dcode, draining)
	}
	for _, want := range []string{"200 " + ok, "503 " + draining} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nginx.conf does not say /healthz answers %s", want)
		}
	}
}
