package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var validSeeds = []string{
	`{}`, `[]`, ` {"a" : [1, -0.5e+3, true, false, null, "x\u00e9\n"]} `, `{"a":1,}`, `[1,]`, `01`, `-`, `1.`, `1e`, `.5`,
	`"\x"`, "\"\x01\"", `"\ud800"`, `"\ud83d\ude00"`, `{"a"}`, `{"a":}`, `{1:2}`, `[}`, `{]`, `tru`, `nul`, `"abc`, `""`,
	`1 2`, "\"\xff\"", `[[[[]]]]`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range validSeeds {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%.40q) = %v, json.Valid = %v", s, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := validJSON(data), json.Valid(data); got != want {
			t.Fatalf("validJSON(%.200q) = %v, json.Valid = %v", data, got, want)
		}
	})
}

// FuzzStringDecode checks that the decoder reads any string token as encoding/json does.
func FuzzStringDecode(f *testing.F) {
	for _, s := range []string{`"plain"`, `"esc\"\\\/\b\f\n\r\t"`, `"\u00e9\ud83d\ude00\ud800x\udc00"`, "\"bad\xff\xc3\"", `"` + strings.Repeat("é\\n", 40) + `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, tok []byte) {
		var want string
		if json.Unmarshal(tok, &want) != nil || !bytes.HasPrefix(bytes.TrimLeft(tok, " \t\r\n"), []byte(`"`)) {
			return
		}
		d := newDec(tok, "", "")
		defer d.release()
		if got := d.str(); got != want {
			t.Fatalf("str(%q) = %q, want %q", tok, got, want)
		}
	})
}
