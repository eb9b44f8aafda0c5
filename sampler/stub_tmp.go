package sampler

// Request, Output and StepResult are placeholders until model.go exists.
type Request struct{}
type Output interface{}
type StepResult struct{}
