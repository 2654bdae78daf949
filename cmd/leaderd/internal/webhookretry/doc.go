// Package webhookretry is a reference job: an outbox of webhook deliveries
// and a worker that sends them with retries.
//
// Any replica may [Outbox.Enqueue] a delivery: it is a plain insert into the
// package's own table (webhookretry_deliveries), on SQLite or PostgreSQL
// (see jobdb.FencedStore). The worker ([Outbox.Worker], a plain Start/Stop
// job to decorate so that one replica runs it) sends due deliveries one at a
// time:
//
//  1. Claim, in a fenced transaction: the delivery becomes in flight with the
//     leader's fencing token, its attempt count goes up, and the claim is
//     valid for [Config.ClaimTTL]. A deposed leader's claim is refused, so it
//     sends nothing.
//  2. POST the payload with an X-Signature header ("sha256=" and the
//     lowercase hex HMAC-SHA256 of the body keyed with [Config.Secret]; a
//     receiver computes it the same way and compares with hmac.Equal), an
//     Idempotency-Key header that is the same on every attempt of a delivery,
//     and a Webhook-Attempt header (1, 2, ...). The request is bounded by
//     [Config.Timeout]; redirects are not followed. Any 2xx is success;
//     everything else, including a timeout, is a failure.
//  3. Record the result, in a fenced transaction: delivered; or pending again
//     after an exponential backoff with jitter; or dead after
//     [Config.MaxAttempts] attempts.
//
// A delivery is never sent twice at the same time: a claim can be taken over
// only once its ClaimTTL has passed, and ClaimTTL is longer than the request
// timeout. If a leader is deposed between claim and result, the delivery
// stays in flight until its claim expires and then the new leader retries it
// with the same Idempotency-Key (delivery is at least once; receivers
// deduplicate by the key).
package webhookretry
