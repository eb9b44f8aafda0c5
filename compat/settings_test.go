package compat

import (
	"bytes"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tetherd/tether/protocol"
)

// TestHotSettingNamesFollowTheKey: settingDiff walks hotSettingNames, so it must name every
// member of a settings key, in order.
func TestHotSettingNamesFollowTheKey(t *testing.T) {
	mo := 7
	r := protocol.NewResponse("resp_1", &protocol.CreateParams{Model: "sim", MaxOutputTokens: &mo, Metadata: map[string]string{"b": "1", "a": "2"}}, 0)
	key := encodeSettings(&r).Key()
	d := jsontext.NewDecoder(bytes.NewReader(key))
	var names []string
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		t.Fatalf("key %s: %v", key, err)
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		names = append(names, tok.String())
		if _, err := d.ReadValue(); err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
	}
	if !slices.Equal(names, hotSettingNames) {
		t.Fatalf("hotSettingNames %v, the key's members %v", hotSettingNames, names)
	}
}
