package webhookretry

import (
	"time"
)

// Status is the state of a delivery.
type Status string

// Statuses of a delivery. A delivery starts pending, is in flight while a
// worker sends it, and ends delivered or dead.
const (
	StatusPending   Status = "pending"   // waiting for its next attempt
	StatusInFlight  Status = "inflight"  // claimed by a worker, being sent
	StatusDelivered Status = "delivered" // a 2xx response was received
	StatusDead      Status = "dead"      // MaxAttempts attempts failed; dead-lettered
)

// Delivery is one webhook delivery as the outbox records it.
type Delivery struct {
	ID             int64
	URL            string
	Payload        []byte
	IdempotencyKey string // sent as Idempotency-Key on every attempt
	Status         Status
	Attempts       int       // attempts started, including one in flight
	NextAttemptAt  time.Time // when a pending delivery is due
	ClaimToken     uint64    // fencing token of the term that claimed it last; 0 if never claimed
	ClaimedUntil   time.Time // while in flight: when the claim may be taken over
	LastStatusCode int       // HTTP status of the last response; 0 if none
	LastError      string    // why the last attempt failed; empty after success
	CreatedAt      time.Time
	DeliveredAt    time.Time // zero unless delivered
}
