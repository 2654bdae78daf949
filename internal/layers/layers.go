// Package layers counts the layers of a decorated job, for the tests and
// benchmarks that prove a job is decorated once and stays so.
package layers

import "github.com/leaderaware/leaderaware/decorator"

// Depth returns the number of layers reachable from j through
// Unwrap() decorator.Job: 0 for a plain job, 1 for a job decorated without
// middleware, and one more per middleware whose job has Unwrap.
func Depth(j decorator.Job) int {
	n := 0
	for j != nil {
		u, ok := j.(interface{ Unwrap() decorator.Job })
		if !ok {
			break
		}
		j = u.Unwrap()
		n++
	}
	return n
}
