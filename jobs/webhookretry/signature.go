package webhookretry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Header names the worker sets on every request.
const (
	SignatureHeader      = "X-Signature"     // "sha256=" + hex HMAC-SHA256 of the body
	IdempotencyKeyHeader = "Idempotency-Key" // the same on every attempt of a delivery
	AttemptHeader        = "Webhook-Attempt" // 1 for the first attempt, then 2, 3, ...
)

// Signature returns the X-Signature value for body: "sha256=" followed by
// the lowercase hex HMAC-SHA256 of body keyed with secret.
func Signature(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether header is the X-Signature of body under
// secret. It compares in constant time; receivers may use it.
func VerifySignature(secret, body []byte, header string) bool {
	return hmac.Equal([]byte(header), []byte(Signature(secret, body)))
}
