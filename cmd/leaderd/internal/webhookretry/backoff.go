package webhookretry

import "time"

// backoff returns the delay before the next attempt after attempts failed
// attempts (attempts ≥ 1): base·2^(attempts-1) capped at maxDelay, of which
// the upper half is scaled by r in [0, 1) ("equal jitter").
func backoff(attempts int, base, maxDelay time.Duration, r float64) time.Duration {
	d := base
	for i := 1; i < attempts && d < maxDelay; i++ {
		if d > maxDelay/2 {
			d = maxDelay
			break
		}
		d *= 2
	}
	d = min(d, maxDelay)
	half := d / 2
	return d - half + time.Duration(r*float64(half))
}
