package webhookretry_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
)

// validSignature reports whether header is the X-Signature of body under
// secret: "sha256=" and the lowercase hex HMAC-SHA256 of body keyed with
// secret, compared in constant time.
func validSignature(secret, body []byte, header string) bool {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal([]byte(header), []byte("sha256="+hex.EncodeToString(m.Sum(nil))))
}

// A receiver checks the X-Signature of each delivery before it trusts the
// body, and deduplicates by Idempotency-Key, which is the same on every
// attempt of one delivery.
func Example_receiver() {
	secret := []byte("whsec_test") // the outbox's Config.Secret
	seen := map[string]bool{}
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || !validSignature(secret, body, r.Header.Get("X-Signature")) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if key := r.Header.Get("Idempotency-Key"); !seen[key] {
			seen[key] = true
			// ... act on body once ...
		}
		w.WriteHeader(http.StatusNoContent)
	}
	_ = handler

	fmt.Println(validSignature(secret, []byte(`{"event":"paid","id":42}`),
		"sha256=878d58c94b1132cfaef30a4b2045a04d074743ffd6fe69fe4525c76801ca6bbc"))
	// Output:
	// true
}
