package elector

import "net/http"

// Healthy is a health check in the shape of controller-runtime's
// healthz.Checker (the request is passed on, and may be nil): the store's
// own, if it has a Healthy(*http.Request) error method (a store that can
// no longer lead at all says so there), and nil otherwise.
func (e *LeaseElector) Healthy(r *http.Request) error {
	if h, ok := e.store.(interface{ Healthy(*http.Request) error }); ok {
		return h.Healthy(r)
	}
	return nil
}
