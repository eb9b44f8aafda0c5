package client

import "testing"

// TestMatchCreateNamingEndedRollout: a create's error that names a rollout ended on the link
// (its previous_response_id) answers that create; the late answer to a cancel of that
// rollout answers nobody.
func TestMatchCreateNamingEndedRollout(t *testing.T) {
	l := &link{pending: []*request{{kind: reqCreate, r: &Rollout{}}}}
	l.remember("resp_ended")
	e := &Error{Code: "previous_response_not_found", Message: "Previous response with id 'resp_ended' not found."}
	if i := l.match(e, ""); i != 0 {
		t.Fatalf("create's error matched %d, want the create (0)", i)
	}
	late := &Error{Code: "response_already_completed", Message: "Response 'resp_ended' has already completed."}
	l.pending = append(l.pending, &request{kind: reqCancel, r: &Rollout{}})
	if i := l.match(late, ""); i != -1 {
		t.Fatalf("late cancel answer matched %d, want none (-1)", i)
	}
}
