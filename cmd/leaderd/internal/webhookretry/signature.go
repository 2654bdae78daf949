package webhookretry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// The headers the worker sets on every request; the package documentation
// describes them.
const (
	signatureHeader      = "X-Signature"
	idempotencyKeyHeader = "Idempotency-Key"
	attemptHeader        = "Webhook-Attempt"
)

// signature returns the X-Signature value for body: "sha256=" followed by
// the lowercase hex HMAC-SHA256 of body keyed with secret.
func signature(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
