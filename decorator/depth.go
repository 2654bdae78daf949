package decorator

// unwrapper is a Job that wraps another one.
type unwrapper interface{ Unwrap() Job }

// Depth returns the number of layers reachable from j through Unwrap() Job:
// 0 for a plain job, 1 for a job decorated without middleware, and one more
// per stock middleware (or any middleware whose job has Unwrap). It is
// constant for a decorated job: Start and Stop never add layers.
func Depth(j Job) int {
	n := 0
	for j != nil {
		u, ok := j.(unwrapper)
		if !ok {
			break
		}
		j = u.Unwrap()
		n++
	}
	return n
}
