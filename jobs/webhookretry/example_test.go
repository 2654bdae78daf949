package webhookretry_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/leaderaware/leaderaware/jobs/webhookretry"
)

// A receiver checks the X-Signature of each delivery before it trusts the
// body, and deduplicates by Idempotency-Key, which is the same on every
// attempt of one delivery.
func ExampleVerifySignature() {
	secret := []byte("whsec_test")
	seen := map[string]bool{}
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || !webhookretry.VerifySignature(secret, body, r.Header.Get(webhookretry.SignatureHeader)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if key := r.Header.Get(webhookretry.IdempotencyKeyHeader); !seen[key] {
			seen[key] = true
			// ... act on body once ...
		}
		w.WriteHeader(http.StatusNoContent)
	}
	_ = handler

	fmt.Println(webhookretry.Signature(secret, []byte(`{"event":"paid","id":42}`)))
	// Output:
	// sha256=878d58c94b1132cfaef30a4b2045a04d074743ffd6fe69fe4525c76801ca6bbc
}
