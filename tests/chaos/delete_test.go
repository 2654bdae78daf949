//go:build linux

package chaos

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestDeletionDatedAfterIt: a deletion of the SQLite file is dated no
// earlier than the removal, which waits for the file's write lock (held by
// a leader's fenced write, whose row may be the old file's last). Dated
// before the wait, the deletion could fall before that row, outside the
// gap it lengthens, and the gap would be reported as too long.
func TestDeletionDatedAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &cluster{t: t, inodes: []uint64{1}}
		var removed time.Time
		c.deleteFile(func(context.Context, int) ([]row, uint64, error) {
			time.Sleep(time.Second) // BEGIN IMMEDIATE waits for a fenced write
			removed = time.Now()
			return nil, 2, nil
		}, "deleted")
		if len(c.deletions) != 1 {
			t.Fatalf("%d deletions recorded, want 1", len(c.deletions))
		}
		if c.deletions[0].Before(removed) {
			t.Errorf("the deletion is dated %v before the files were removed", removed.Sub(c.deletions[0]))
		}
	})
}
