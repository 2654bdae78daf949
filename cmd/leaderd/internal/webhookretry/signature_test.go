package webhookretry_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/leaderaware/leaderaware/cmd/leaderd/internal/webhookretry"
)

// TestSignature: the worker signs as the package documentation says, so a
// receiver that follows it (validSignature) accepts exactly the right body
// under the right secret.
func TestSignature(t *testing.T) {
	// echo -n '{"event":"paid","id":42}' | openssl dgst -sha256 -hmac whsec_test
	const want = "sha256=878d58c94b1132cfaef30a4b2045a04d074743ffd6fe69fe4525c76801ca6bbc"
	secret, body := []byte("whsec_test"), []byte(`{"event":"paid","id":42}`)
	assert.Equal(t, want, webhookretry.Signature(secret, body))
	assert.True(t, validSignature(secret, body, want))
	assert.False(t, validSignature([]byte("other"), body, want))
	assert.False(t, validSignature(secret, []byte(`{}`), want))
	assert.False(t, validSignature(secret, body, ""))
}
