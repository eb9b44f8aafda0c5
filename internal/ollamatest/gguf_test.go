package ollamatest

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherd/tether/internal/llamatest"
)

// TestSetUint32 rewrites llama.context_length in the real test model: exactly those four bytes
// change, to the new value, and a second rewrite finds the first one's value.
func TestSetUint32(t *testing.T) {
	models := llamatest.ModelsDir()
	if models == "" {
		t.Skip("the test model aidreams260K.gguf is missing from shared/models beside the repository (or set TETHER_LLAMA_MODELS)")
	}
	b, err := os.ReadFile(filepath.Join(models, "aidreams260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := setUint32(b, "llama.context_length", 4096)
	if err != nil {
		t.Fatal(err)
	}
	var diff []int
	for i := range b {
		if b[i] != out[i] {
			diff = append(diff, i)
		}
	}
	if len(out) != len(b) || len(diff) == 0 || len(diff) > 4 || diff[len(diff)-1]-diff[0] > 3 {
		t.Fatalf("changed bytes %v of %d (now %d)", diff, len(b), len(out))
	}
	at := bytes.Index(b, []byte("llama.context_length")) + len("llama.context_length") + 4
	if old, now := binary.LittleEndian.Uint32(b[at:]), binary.LittleEndian.Uint32(out[at:]); old != 128 || now != 4096 {
		t.Fatalf("context_length %d -> %d, want 128 -> 4096", old, now)
	}
	if _, err := setUint32(b, "llama.no_such_key", 1); err == nil || !strings.Contains(err.Error(), "no llama.no_such_key") {
		t.Errorf("missing key: %v", err)
	}
	if _, err := setUint32(b, "general.architecture", 1); err == nil || !strings.Contains(err.Error(), "want uint32") {
		t.Errorf("string key: %v", err)
	}
	if _, err := setUint32([]byte("not a gguf file at all, no"), "llama.context_length", 1); err == nil {
		t.Error("a non-GGUF file was accepted")
	}
}
