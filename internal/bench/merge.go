package bench

import (
	"fmt"
	"slices"
)

// Merge combines the reports of runs of one workload that each ran a different subset of the
// transports (tether serve -ui runs one Run per transport at the same time) into one report:
// the transports in report order, the ratios against http and history_tokens_end recomputed,
// started_at the earliest and elapsed_s the longest. The runs must agree on mode, speed and
// workload; the events/s measurements are the first report's. The inputs are not modified.
func Merge(reps ...*Report) (*Report, error) {
	if len(reps) == 0 || slices.Contains(reps, nil) {
		return nil, fmt.Errorf("bench: merge: no report")
	}
	out := *reps[0]
	out.Transports = nil
	out.Workload.HistoryTokensEnd = 0
	for _, r := range reps {
		w := r.Workload
		w.HistoryTokensEnd = 0
		if r.Mode != out.Mode || r.RealtimeSpeed != out.RealtimeSpeed || w != out.Workload {
			return nil, fmt.Errorf("bench: merge: the runs differ in mode, speed or workload")
		}
		for _, t := range r.Transports {
			if slices.ContainsFunc(out.Transports, func(u TransportReport) bool { return u.Name == t.Name }) {
				return nil, fmt.Errorf("bench: merge: transport %s in two runs", t.Name)
			}
			t.E2E = cloneE2E(t.E2E)
			out.Transports = append(out.Transports, t)
		}
		out.StartedAt = min(out.StartedAt, r.StartedAt) // RFC 3339 in UTC sorts as time
		out.ElapsedS = max(out.ElapsedS, r.ElapsedS)
	}
	slices.SortStableFunc(out.Transports, func(a, b TransportReport) int {
		return slices.Index(Transports, a.Name) - slices.Index(Transports, b.Name)
	})
	finishRatios(&out)
	return &out, nil
}

func cloneE2E(m map[string]E2E) map[string]E2E {
	out := make(map[string]E2E, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
