package protocol

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// foldCases are creates with several violations, decode errors after violations, and the
// shapes that checkBounds walks its own way (types that are not strings, types that are not
// first, members that repeat, members the decoder does not model).
var foldCases = []string{
	`{"model":"m","type":5,"temperature":9,"input":[{"role":"user","content":"x","phase":"bad"}]}`,
	`{"model":"m","type":null,"temperature":9}`,
	`{"model":"m","type":"x","temperature":9}`,
	`{"model":"m","temperature":9,"top_p":3,"input":[{"role":"wizard","content":"x"}]}`,
	`{"model":"m","temperature":9,"max_output_tokens":1.5}`,
	`{"model":"m","input":[{"role":"user","content":"x","phase":"bad","call_id":""}],"temperature":9}`,
	`{"model":"m","text":{"type":5,"format":{"type":"bad"}}}`,
	`{"model":"m","text":{"format":{"type":"bad"},"type":5}}`,
	`{"model":"m","text":{"format":{"name":"bad name","type":"json_schema"}}}`,
	`{"model":"m","text":{"format":{"type":5,"name":"bad name"}}}`,
	`{"model":"m","text":{"format":{"type":"json_schema","name":""},"verbosity":"low"}}`,
	`{"model":"m","metadata":{"a":"1","a":"1","b":"1","c":"1","d":"1","e":"1","f":"1","g":"1","h":"1","i":"1","j":"1","k":"1","l":"1","m":"1","n":"1","o":"1","p":"1"}}`,
	`{"model":"m","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}}`,
	`{"model":"m","tool_choice":{"type":"custom","mode":"bad"}}`,
	`{"model":"m","include":["x",5],"service_tier":"slow"}`,
	`{"model":"m","input":[{"call_id":"","type":"function_call_output","output":"x"}]}`,
	`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"a b","name":"ok","arguments":"{}"}]}`,
	`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"ok","arguments":"{}","role":"bad","phase":"bad"}]}`,
	`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","detail":"bad","image_url":"x"},{"type":"input_text","text":"x","detail":"bad"}]}]}`,
	`{"model":"m","input":[{"type":"reasoning","status":"bad","summary":[{"type":"summary_text","text":"x"}],"content":{"[]":{"detail":"bad"}}}]}`,
	`{"model":"m","input":[{"type":"reasoning","summary":[{"text":1e400}]}]}`,
	`{"model":"m","input":[{"type":"reasoning","name":"a b","call_id":""}]}`,
	`{"model":"m","input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"start_index":-1,"end_index":-2}]}]}]}`,
	`{"model":"m","input":[{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"x","text":1e400}]}]}`,
	`{"model":"m","input":[{"role":"user","type":"message","content":[{"text":"x","type":"input_text","detail":"bad"}]}]}`,
	`{"model":"m","input":[{"content":"x","role":"user","name":"a b","type":"function_call","call_id":"c","arguments":""}]}`,
	`{"model":"m","tools":[{"type":"function","name":"a b"},{"name":"","type":"function"},{"type":"custom","name":"a b"}]}`,
	`{"model":"m","tools":[{"type":"function","name":"ok","parameters":{"x":1e400}}],"temperature":9}`,
	`{"model":"m","temperature":9,"tools":[{"type":"function","name":"ok","name":7}]}`,
	`{"type":"response.create","model":"m","temperature":9,"input":[{"type":"message","role":"user","content":"x","phase":"bad"}]}`,
	`{"model":"m","type":"response.create","top_p":-1,"input":"x"}`,
	`{"type":"response.create","model":"m","reasoning":{"effort":"max","summary":"none"},"input":[{"role":"user","content":[]}],"model2":1}`,
	`{"type":"response.append","response_id":"r","input":[{"role":"user","content":"x","phase":"bad"}]}`,
	`{"model":"m","type":true,"temperature":9}`,
	`{"model":"m","type":{"type":"x"},"temperature":9}`,
	`{"model":"m","temperature":9,"type":[]}`,
	`{"type":"response.create","model":"m","text":{"type":[1],"format":{"type":"json_schema","name":"a b"}}}`,
	`{"model":"m","text":{"type":false,"format":{"type":{},"name":""}}}`,
	`{"model":"m","text":{"format":{"type":[],"type":"json_schema","name":""}}}`,
	`{"model":"m","input":[{"type":5,"role":"user","content":"x","phase":"bad"}],"temperature":9}`,
	`{"model":"m","input":[{"role":"user","content":[{"text":"x","type":true,"detail":"bad"}]}]}`,
	`{"model":"m","tools":[{"name":"a b","type":{}}]}`,
	`{"model":"m","tool_choice":{"type":[],"mode":"bad"},"temperature":9}`,
	`{"model":"m","tool_choice":{"type":"allowed_tools","tools":[{"type":5}]},"temperature":9}`,
}

// TestBoundsTypeNotAString: a "type" that is neither a string nor null turns no bound off. Where
// the decoder ignores it (a request body's top level, text, text.format) the other members are
// checked as in an object without a type; where it chooses a shape (a frame, items, content
// parts, tools, tool_choice) the decoder's invalid_type is the answer. Both paths agree.
func TestBoundsTypeNotAString(t *testing.T) {
	for _, tc := range []struct {
		data        string
		frame       bool // decoded as a frame, else as a request body
		code, param string
	}{
		{`{"model":"m","type":5,"temperature":9,"input":"hi"}`, false, CodeDecimalAboveMax, "temperature"},
		{`{"model":"m","type":true,"temperature":9,"input":"hi"}`, false, CodeDecimalAboveMax, "temperature"},
		{`{"model":"m","type":{},"temperature":9,"input":"hi"}`, false, CodeDecimalAboveMax, "temperature"},
		{`{"model":"m","type":[],"temperature":9,"input":"hi"}`, false, CodeDecimalAboveMax, "temperature"},
		{`{"model":"m","temperature":9,"type":[5]}`, false, CodeDecimalAboveMax, "temperature"},
		{`{"type":{"type":"response.create"},"model":"m","input":[{"role":"user","content":"x","phase":"bad"}]}`, false, CodeInvalidValue, "input[0].phase"},
		{`{"type":5,"model":"m","temperature":9}`, true, CodeInvalidType, "type"},
		{`{"model":"m","temperature":9,"type":[]}`, true, CodeInvalidType, "type"},
		{`{"model":"m","text":{"type":5,"format":{"type":"bad"}}}`, false, CodeInvalidValue, "text.format.type"},
		{`{"type":"response.create","model":"m","text":{"format":{"type":"json_schema","name":"a b","schema":{}},"type":{}}}`, true, CodeInvalidValue, "text.format.name"},
		{`{"model":"m","text":{"type":null,"format":{"type":"json_schema","name":"","schema":{}}}}`, false, CodeStringBelowMinLength, "text.format.name"},
		{`{"model":"m","text":{"format":{"type":5,"name":""}}}`, false, CodeInvalidType, "text.format.type"},
		{`{"model":"m","text":{"format":{"name":"","type":[]}}}`, false, CodeInvalidType, "text.format.type"},
		{`{"model":"m","temperature":9,"input":[{"type":5,"role":"user","content":"x"}]}`, false, CodeInvalidType, "input[0].type"},
		{`{"model":"m","temperature":9,"input":[{"role":"user","content":[{"text":"x","type":true}]}]}`, false, CodeInvalidType, "input[0].content[0].type"},
		{`{"model":"m","temperature":9,"input":[{"type":"function_call_output","call_id":"c","output":[{"type":{}}]}]}`, false, CodeInvalidType, "input[0].output[0].type"},
		{`{"model":"m","temperature":9,"tools":[{"name":"a b","type":{}}]}`, false, CodeInvalidType, "tools[0].type"},
		{`{"model":"m","temperature":9,"tool_choice":{"type":[]}}`, false, CodeInvalidType, "tool_choice.type"},
		{`{"model":"m","temperature":9,"tool_choice":{"type":"allowed_tools","tools":[{"type":5}]}}`, false, CodeInvalidType, "tool_choice.tools[0].type"},
	} {
		for _, fold := range []bool{true, false} {
			var err *Error
			if tc.frame {
				_, err = decodeClientEvent(context.Background(), []byte(tc.data), fold)
			} else {
				_, err = decodeCreateParams(context.Background(), []byte(tc.data), fold)
			}
			if err == nil || err.Code != tc.code || err.Param != tc.param {
				t.Errorf("%s (frame %v, fold %v): %v, want %s %s", tc.data, tc.frame, fold, err, tc.code, tc.param)
			}
		}
	}
}

// foldSeeds returns the create frames and bodies the differential tests start from: foldCases,
// the decoder tests' frames, the bound examples (both shapes; without the multi-megabyte ones
// when small is set) and the JSON objects quoted in the conformance scenarios.
func foldSeeds(t testing.TB, small bool) []string {
	seeds := slices.Clone(foldCases)
	for _, tc := range badFrames {
		seeds = append(seeds, tc.frame)
	}
	seeds = append(seeds, codexCreate, string(typicalCreate()), string(hotTurn()))
	for _, ex := range BoundExamples() {
		if small && len(ex.Body) > 4096 {
			continue
		}
		seeds = append(seeds, ex.Body, `{"type":"response.create",`+ex.Body[1:])
	}
	return append(seeds, quotedObjects(t, "../conformance")...)
}

// quotedObjects returns the string literals of the Go files in dir that look like JSON objects
// with a "model", with %q and %s read as "sim".
func quotedObjects(t testing.TB, dir string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && strings.HasPrefix(s, "{") && strings.Contains(s, `"model"`) {
				out = append(out, strings.NewReplacer("%q", `"sim"`, "%s", "sim").Replace(s))
			}
			return true
		})
	}
	return out
}

// compareFold decodes data as a frame and as a request body with the bounds checked during the
// decoding and with checkBounds' second walk, and fails unless both give the same result.
func compareFold(t *testing.T, data []byte) {
	t.Helper()
	ctx := context.Background()
	ev, err := decodeClientEvent(ctx, data, true)
	refEv, refErr := decodeClientEvent(ctx, data, false)
	if !reflect.DeepEqual(err, refErr) || !reflect.DeepEqual(ev, refEv) {
		t.Fatalf("frame %.300s:\n got %+v\nwant %+v", data, err, refErr)
	}
	cp, err := decodeCreateParams(ctx, data, true)
	refCp, refErr := decodeCreateParams(ctx, data, false)
	if !reflect.DeepEqual(err, refErr) || !reflect.DeepEqual(cp, refCp) {
		t.Fatalf("body %.300s:\n got %+v\nwant %+v", data, err, refErr)
	}
}

// TestBoundsInDecode: on every seed, holding a create to CreateBounds while decoding it gives
// exactly the decoding and the error of the second walk.
func TestBoundsInDecode(t *testing.T) {
	seeds := foldSeeds(t, raceEnabled)
	if len(seeds) < 200 {
		t.Fatalf("only %d seeds", len(seeds))
	}
	for _, s := range seeds {
		compareFold(t, []byte(s))
	}
}

// TestBoundsInDecodeFindsViolations: the seeds exercise the bounds: many of them fail with a
// bound's error, and foldCases with the first of several.
func TestBoundsInDecodeFindsViolations(t *testing.T) {
	bound := 0
	for _, s := range foldSeeds(t, true) {
		_, err := DecodeCreateParams(context.Background(), []byte(s))
		if err != nil && err.Code != CodeInvalidJSON && err.Code != CodeInvalidType && err.Code != CodeMissingRequiredParameter {
			bound++
		}
	}
	if bound < 50 {
		t.Errorf("only %d seeds fail with a bound's error", bound)
	}
	_, err := DecodeCreateParams(context.Background(), []byte(foldCases[3]))
	if err == nil || err.Code != CodeInvalidValue || err.Param != "input[0].role" {
		t.Errorf("a decode error after two violations: %v", err)
	}
	_, err = DecodeCreateParams(context.Background(), []byte(foldCases[5]))
	if err == nil || err.Code != CodeInvalidValue || err.Param != "input[0].phase" {
		t.Errorf("three violations: %v, want the first, input[0].phase", err)
	}
}

// TestBoundsInDecodeCoversTable pins the rows the decoders check as they read (under input and
// tools): a new row there must be checked by them (see boundfold.go) before it is added here.
func TestBoundsInDecodeCoversTable(t *testing.T) {
	folded := []string{
		"input", "input[].role", "input[].status", "input[].phase", "input[].content", "input[].content[].text",
		"input[].content[].refusal", "input[].content[].image_url", "input[].content[].file_data",
		"input[].content[].detail", "input[].content[].annotations[].start_index",
		"input[].content[].annotations[].end_index", "input[].summary[].text", "input[].encrypted_content",
		"input[].call_id", "input[].name", "input[].output", "input[].output[].text", "input[].output[].image_url",
		"input[].output[].file_data", "input[].output[].detail", "tools[].name",
	}
	for _, row := range CreateBounds {
		if strings.HasPrefix(row.Param, "input") || strings.HasPrefix(row.Param, "tools[]") {
			if !slices.Contains(folded, row.Param) {
				t.Errorf("row %s is not known to the decoders' checks", row.Param)
			}
			if row.Kind == BoundItems || row.Kind == BoundProperties {
				t.Errorf("row %s counts members or elements, which the decoders do not", row.Param)
			}
		}
	}
}

// FuzzBoundsInDecode compares the bounds checked during the decoding with checkBounds' second
// walk on any input, as a frame and as a request body.
func FuzzBoundsInDecode(f *testing.F) {
	for _, s := range foldSeeds(f, true) {
		f.Add([]byte(s))
	}
	f.Fuzz(compareFold)
}

// TestBoundsKindOfCarriedMembers: a member the decoders carry through unread (an item's phase,
// a part's detail, image_url or file_data, a reasoning item's encrypted_content, an
// annotation's index) that has a bound gets invalid_type when its JSON type is not the bound's,
// in a create and in an append, in both walks; null passes.
func TestBoundsKindOfCarriedMembers(t *testing.T) {
	img := func(m string) string {
		return `{"type":"message","role":"user","content":[{"type":"input_image","image_url":"https://x/y.png",` + m + `}]}`
	}
	for _, tc := range []struct{ item, param, msg string }{
		{`{"type":"message","role":"assistant","phase":5,"content":"x"}`, "input[0].phase", "expected a string, but got a number"},
		{`{"type":"message","role":"assistant","phase":true,"content":"x"}`, "input[0].phase", "expected a string, but got a boolean"},
		{img(`"detail":5`), "input[0].content[0].detail", "expected a string, but got a number"},
		{`{"type":"message","role":"user","content":[{"type":"input_image","image_url":false}]}`, "input[0].content[0].image_url", "expected a string, but got a boolean"},
		{`{"type":"message","role":"user","content":[{"type":"input_file","file_data":7}]}`, "input[0].content[0].file_data", "expected a string, but got a number"},
		{`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":5}`, "input[0].encrypted_content", "expected a string, but got a number"},
		{`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","start_index":"0","end_index":0,"url":"u","title":"t"}]}]}`,
			"input[0].content[0].annotations[0].start_index", "expected an integer, but got a string"},
		// An object or an array where a scalar is bound: the walks used to descend into it
		// (no member of it has a bound) and accept it.
		{`{"type":"message","role":"assistant","phase":{},"content":"x"}`, "input[0].phase", "expected a string, but got an object"},
		{`{"type":"message","role":"assistant","phase":["commentary"],"content":"x"}`, "input[0].phase", "expected a string, but got an array"},
		{img(`"detail":[]`), "input[0].content[0].detail", "expected a string, but got an array"},
		{img(`"detail":{"x":1}`), "input[0].content[0].detail", "expected a string, but got an object"},
		{`{"type":"message","role":"user","content":[{"type":"input_image","image_url":{"url":"https://x/y.png"}}]}`, "input[0].content[0].image_url", "expected a string, but got an object"},
		{`{"type":"message","role":"user","content":[{"type":"input_file","file_data":[]}]}`, "input[0].content[0].file_data", "expected a string, but got an array"},
		{`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":{}}`, "input[0].encrypted_content", "expected a string, but got an object"},
		{`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","start_index":0,"end_index":[1],"url":"u","title":"t"}]}]}`,
			"input[0].content[0].annotations[0].end_index", "expected an integer, but got an array"},
		{`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","start_index":{},"end_index":0,"url":"u","title":"t"}]}]}`,
			"input[0].content[0].annotations[0].start_index", "expected an integer, but got an object"},
		{`{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x/y.png","detail":{}}]}`,
			"input[0].output[0].detail", "expected a string, but got an object"},
		{`{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_data":["x"]}]}`,
			"input[0].output[0].file_data", "expected a string, but got an array"},
	} {
		bodies := map[string]bool{
			`{"model":"m","input":[` + tc.item + `]}`:                                     false,
			`{"type":"response.append","response_id":"resp_1","input":[` + tc.item + `]}`: true,
		}
		for body, frame := range bodies {
			for _, fold := range []bool{true, false} {
				var err *Error
				if frame {
					_, err = decodeClientEvent(context.Background(), []byte(body), fold)
				} else {
					_, err = decodeCreateParams(context.Background(), []byte(body), fold)
				}
				want := "Invalid type for '" + tc.param + "': " + tc.msg + "."
				if err == nil || err.Code != CodeInvalidType || err.Param != tc.param || err.Message != want {
					t.Errorf("%s (fold %v): %v, want %q", body, fold, err, want)
				}
			}
		}
	}
	for _, item := range []string{
		`{"type":"message","role":"assistant","phase":null,"content":"x"}`,
		img(`"detail":null`),
		img(`"detail":"low"`),
		// composite values where the bound's node has members of its own stay the readers'
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}]}`,
		`{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}`,
	} {
		body := `{"model":"m","input":[` + item + `]}`
		for _, fold := range []bool{true, false} {
			if _, err := decodeCreateParams(context.Background(), []byte(body), fold); err != nil {
				t.Errorf("%s (fold %v): %v", body, fold, err)
			}
		}
	}
}
