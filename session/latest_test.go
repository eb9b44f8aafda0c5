package session

import (
	"testing"
	"testing/synctest"

	"github.com/tetherd/tether/protocol"
)

// TestLatestIsTheRolloutsState: the latest Response of a suspended rollout is kept by its
// registry entry; of two takers of one latest Response exactly one gets it; forgetting a
// Response that is not the latest changes nothing, forgetting the latest one ends the
// rollout (nothing can reach it any more).
func TestLatestIsTheRolloutsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, c, stop := serve(t, Options{})
		defer stop()
		key, _ := start(t, p, "suspend", true)
		if id, live := c.Latest(key); id != "" || !live {
			t.Fatalf("a new suspended rollout: Latest %q live %v, want \"\" true", id, live)
		}
		if id, live := c.Latest("resp_unknown"); id != "" || live {
			t.Fatalf("an unknown key: Latest %q live %v", id, live)
		}
		c.SetLatest(key, "resp_seg1")
		if id, _ := c.Latest(key); id != "resp_seg1" {
			t.Fatalf("Latest %q after SetLatest, want resp_seg1", id)
		}
		if c.TakeLatest(key, "resp_other") || c.TakeLatest(key, "") {
			t.Fatal("TakeLatest of a Response that is not the latest succeeded")
		}
		if !c.TakeLatest(key, "resp_seg1") {
			t.Fatal("TakeLatest of the latest Response failed")
		}
		if c.TakeLatest(key, "resp_seg1") {
			t.Fatal("a second TakeLatest of the same Response succeeded")
		}
		if id, live := c.Latest(key); id != "" || !live {
			t.Fatalf("after TakeLatest: Latest %q live %v, want \"\" true", id, live)
		}

		c.KeepResponse("resp_seg1", key, nil, 10, nil)
		c.SetLatest(key, "resp_seg2")
		c.KeepResponse("resp_seg2", key, nil, 10, nil)
		c.KeepResponse("resp_other", "resp_unknown", nil, 10, nil)
		if c.ForgetResponse("resp_seg1") || c.ForgetResponse("resp_other") || c.ForgetResponse("resp_never_kept") {
			t.Fatal("forgetting a Response that is not the latest ended the rollout")
		}
		if got := liveKeys(c); len(got) != 1 {
			t.Fatalf("live rollouts %v, want [%s]", got, key)
		}
		if !c.ForgetResponse("resp_seg2") {
			t.Fatal("forgetting the latest Response did not end the rollout")
		}
		if f := p.next(t); f["type"] != string(protocol.EventIncomplete) || reason(f) != protocol.ReasonCancelled {
			t.Fatalf("the orphaned rollout ended with %v, want response.incomplete (cancelled)", f)
		}
		synctest.Wait()
		if id, live := c.Latest(key); id != "" || live {
			t.Fatalf("an ended rollout: Latest %q live %v", id, live)
		}
		if got := liveKeys(c); len(got) != 0 {
			t.Fatalf("live rollouts %v after the orphan ended", got)
		}
		checkHeld(t, c)
	})
}
