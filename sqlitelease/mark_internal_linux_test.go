package sqlitelease

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/clock"
)

// TestIssueRaiseFailsRollsBack: when the mark cannot be raised after the
// acquire statement issued its token (here: the liveness file is closed in
// between), the statement rolls back: the lease stays free and the file's
// own high-water mark does not move.
func TestIssueRaiseFailsRollsBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "leases.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	markOf := func() (mark int64) {
		if err := other.DB().QueryRowContext(ctx, fileMarkSQL).Scan(&mark); err != nil {
			t.Fatal(err)
		}
		return mark
	}
	before := markOf()

	var issued int64
	liveFile, liveOffset := s.live.args()
	err = s.withLease(ctx, func(lc *leaseConn) error {
		wall := clock.Wall()
		return s.issue(ctx, lc, "job", 60_000, wall.UnixMicro(), func(floor int64) (int64, error) {
			rows, err := lc.acquire.QueryContext(ctx, "job", "a", 60_000, nil, nil, floor, wall.UnixMilli(), liveFile, liveOffset)
			var version int64
			err = scanOne(rows, err, &issued, &version)
			_ = s.live.close() // the raise that follows fails
			return issued, err
		})
	})
	if !errors.Is(err, errSidecarClosed) {
		t.Fatalf("issue = %v, want the error of the raise", err)
	}
	if issued == 0 {
		t.Fatal("the statement issued no token")
	}
	if _, err := other.Get(ctx, "job"); !errors.Is(err, elector.ErrNoLease) {
		t.Fatalf("Get after the failed raise = %v, want ErrNoLease: the statement must roll back", err)
	}
	if got := markOf(); got != before {
		t.Fatalf("the file's high-water mark moved from %d to %d", before, got)
	}
	// The connection is left clean: the next lease operation works.
	if _, err := s.Renew(ctx, elector.Lease{Name: "job", Holder: "a", Token: 1}, time.Minute); !errors.Is(err, elector.ErrLeaseLost) {
		t.Fatalf("Renew on the same connection = %v, want ErrLeaseLost", err)
	}
}
