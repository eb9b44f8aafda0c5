package bench

import (
	"testing"

	"github.com/tetherd/tether/protocol"
	"github.com/tetherd/tether/sampler/sim"
)

// BenchmarkTokenizeToolOutput tokenizes (sim.RenderItems, as the floor does) the 2 KiB tool
// outputs of the workload, 200 different ones in turn: warm, with the CPU caches holding what
// the earlier outputs left, and thrashed, with 16 MiB of memory written between two outputs the
// way a server's other work (GC, encoding, the client on the same cores) evicts them.
func BenchmarkTokenizeToolOutput(b *testing.B) {
	outs := make([][]protocol.Item, 200)
	for i := range outs {
		outs[i] = []protocol.Item{{Type: protocol.ItemFunctionCallOutput, CallID: "call_1",
			Output: toolOutput(i%7, i+1, 2048)}}
	}
	for _, o := range outs { // the segments of the outputs, as a running server holds them
		sim.RenderItems(nil, o)
	}
	thrash := make([]byte, 16<<20)
	for _, name := range []string{"warm", "thrashed"} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(2048)
			i := 0
			for b.Loop() {
				if name == "thrashed" {
					b.StopTimer()
					for j := 0; j < len(thrash); j += 64 {
						thrash[j]++
					}
					b.StartTimer()
				}
				sim.RenderItems(nil, outs[i%len(outs)])
				i++
			}
		})
	}
}
