package decorator

// Depth returns the number of layers reachable from j through Unwrap() Job:
// 0 for a plain job, 1 for a job decorated without middleware, and one more
// per stock middleware (or any middleware whose job has Unwrap).
func Depth(j Job) int {
	n := 0
	for j != nil {
		u, ok := j.(interface{ Unwrap() Job })
		if !ok {
			break
		}
		j = u.Unwrap()
		n++
	}
	return n
}

// Len returns the number of middleware in c.
func (c Chain) Len() int { return len(c.mws) }
