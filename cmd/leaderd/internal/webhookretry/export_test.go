package webhookretry

// SetRand replaces the backoff jitter source of w (values in [0, 1)).
func SetRand(w *Worker, f func() float64) { w.rand = f }

// Backoff exposes backoff to the tests.
var Backoff = backoff

// Signature exposes signature to the tests.
var Signature = signature
