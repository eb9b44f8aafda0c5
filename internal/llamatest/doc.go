// Package llamatest starts a real llama.cpp llama-server for tests: on a free loopback port,
// with the small test model the project keeps beside the repository (aidreams260K.gguf and the
// tools-paren.jinja chat template in shared/models beside the repository), stopped when the test ends.
//
// The binary is $TETHER_LLAMA_SERVER, else llama-server on PATH, else the one that
// .ci/build-llama caches (~/.cache/tether/llama-server-<version>/llama-server). The model
// directory is $TETHER_LLAMA_MODELS, else shared/models beside the module root. When either
// is missing the test is skipped, unless TETHER_REQUIRE_LLAMA=1 (CI), which makes it fail.
//
// # The model
//
// The model does not follow instructions: whether it calls a tool depends on the exact prompt,
// deterministically at temperature 0 with one thread. Tests that need a call use prompts it is
// seen to call on (CallPrompt); tests never assert the text it writes.
package llamatest
