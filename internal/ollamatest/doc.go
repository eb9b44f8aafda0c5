// Package ollamatest starts a real Ollama server for tests: `ollama serve` on a free loopback
// port with its model store in a temporary directory, the small test model the project keeps
// beside the repository (aidreams260K.gguf in shared/models) created in it under the name
// Model, stopped when the test ends. Nothing is pulled from the network.
//
// The binary is $TETHER_OLLAMA, else ollama on PATH, else the one that .ci/build-ollama caches
// (~/.cache/tether/ollama-<version>/ollama). The model directory is $TETHER_LLAMA_MODELS, else
// shared/models beside the module root. When either is missing the test is skipped, unless
// TETHER_REQUIRE_OLLAMA=1 (CI), which makes it fail.
//
// # The model
//
// Ollama caps a model's context at the context_length the GGUF declares, whatever num_ctx
// asks, and the test model was trained on 128 positions: the server is given a copy of the
// GGUF whose llama.context_length says Options.Context (text past 128 positions is babble,
// mechanically sound). The model does not follow instructions; tests never assert its text.
package ollamatest
