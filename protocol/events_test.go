package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestConstructors: each constructor sets its type and exactly the fields that type encodes.
func TestConstructors(t *testing.T) {
	resp := &Response{ID: "resp_1", Status: ResponseIncomplete}
	item := &Item{ID: "msg_1", Type: ItemMessage}
	part := &ContentPart{Type: PartOutputText}
	usage := &Usage{InputTokens: 1}
	e := &Error{Code: CodeSteeringNotSupported}
	steer := json.RawMessage(`{}`)
	for _, c := range []struct{ got, want Event }{
		{Created(resp), Event{Type: EventCreated, Response: resp}},
		{InProgress(resp), Event{Type: EventInProgress, Response: resp}},
		{Terminal(resp), Event{Type: EventIncomplete, Response: resp}},
		{Terminal(&Response{Status: ResponseCompleted}), Event{Type: EventCompleted, Response: &Response{Status: ResponseCompleted}}},
		{OutputItemAdded(2, item), Event{Type: EventOutputItemAdded, OutputIndex: 2, Item: item}},
		{OutputItemDone(2, item), Event{Type: EventOutputItemDone, OutputIndex: 2, Item: item}},
		{ContentPartAdded(2, 1, "msg_1", part), Event{Type: EventContentPartAdded, OutputIndex: 2, ContentIndex: 1, ItemID: "msg_1", Part: part}},
		{ContentPartDone(2, 1, "msg_1", part), Event{Type: EventContentPartDone, OutputIndex: 2, ContentIndex: 1, ItemID: "msg_1", Part: part}},
		{OutputTextDelta(2, 1, "msg_1", "d"), Event{Type: EventOutputTextDelta, OutputIndex: 2, ContentIndex: 1, ItemID: "msg_1", Delta: "d"}},
		{OutputTextDone(2, 1, "msg_1", "t"), Event{Type: EventOutputTextDone, OutputIndex: 2, ContentIndex: 1, ItemID: "msg_1", Text: "t"}},
		{ArgumentsDelta(2, "fc_1", "d"), Event{Type: EventArgumentsDelta, OutputIndex: 2, ItemID: "fc_1", Delta: "d"}},
		{ArgumentsDone(2, "fc_1", "f", "{}"), Event{Type: EventArgumentsDone, OutputIndex: 2, ItemID: "fc_1", Name: "f", Arguments: "{}"}},
		{Done("resp_1", []string{"c"}, []Item{*item}, usage), Event{Type: EventDone, ResponseID: "resp_1", PendingCallIDs: []string{"c"}, Output: []Item{*item}, Usage: usage}},
		{SteerFailed(steer, e), Event{Type: EventSteerFailed, Steer: steer, Error: e}},
		{ErrorEvent(e), Event{Type: EventError, Error: e}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %+v, want %+v", c.want.Type, c.got, c.want)
		}
	}
}
