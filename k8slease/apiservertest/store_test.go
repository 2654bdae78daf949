package apiservertest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
	"github.com/leaderaware/leaderaware/internal/testing/watchtest"
	"github.com/leaderaware/leaderaware/k8slease"
)

// TestStore runs the store contract, linearizability included, against the
// real API server.
func TestStore(t *testing.T) {
	ns := newNamespace(t)
	electortest.TestStore(t, func(t *testing.T) elector.Store { return newStore(t, ns) })
}

// TestLeaseObject: a lease whose name is an object name is the Lease of
// that name, with the spec client-go writes and the token in an
// annotation; other names are encoded reversibly.
func TestLeaseObject(t *testing.T) {
	ns := newNamespace(t)
	s := newStore(t, ns)
	l, err := s.TryAcquire(testCtx(t), "price-refresh", "web-1", 2500*time.Millisecond, elector.Lease{})
	require.NoError(t, err)
	obj, err := admin(t).CoordinationV1().Leases(ns).Get(testCtx(t), "price-refresh", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "web-1", *obj.Spec.HolderIdentity)
	assert.Equal(t, int32(4), *obj.Spec.LeaseDurationSeconds, "2.5s rounded up to 3s, and a second of margin")
	assert.Equal(t, int32(1), *obj.Spec.LeaseTransitions)
	assert.Equal(t, obj.ResourceVersion, itoa(l.Version))
	assert.Equal(t, itoa(l.Token), obj.Annotations[k8slease.AnnotationToken])
	assert.Equal(t, "2500", obj.Annotations[k8slease.AnnotationTTL])

	require.NoError(t, s.Release(testCtx(t), l))
	obj, err = admin(t).CoordinationV1().Leases(ns).Get(testCtx(t), "price-refresh", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "", *obj.Spec.HolderIdentity, "release clears holderIdentity, as client-go's ReleaseOnCancel does")

	objName, err := k8slease.ObjectName("Jobs/Price Refresh")
	require.NoError(t, err)
	_, err = s.TryAcquire(testCtx(t), "Jobs/Price Refresh", "web-1", time.Minute, elector.Lease{})
	require.NoError(t, err)
	_, err = admin(t).CoordinationV1().Leases(ns).Get(testCtx(t), objName, metav1.GetOptions{})
	require.NoError(t, err, "the encoded object name")
}

// TestTokensAfterDelete: deleting the Lease (kubectl delete lease) does not
// take tokens back, for the store that saw them and for a new one.
func TestTokensAfterDelete(t *testing.T) {
	ns := newNamespace(t)
	a := newStore(t, ns)
	first, err := a.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	del := func() {
		t.Helper()
		require.NoError(t, admin(t).CoordinationV1().Leases(ns).Delete(testCtx(t), "job", metav1.DeleteOptions{}))
	}
	del()
	second, err := a.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, second.Token, first.Token)
	assert.Greater(t, second.Version, first.Version, "resourceVersions grow across a delete")
	del()
	third, err := newStore(t, ns).TryAcquire(testCtx(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	assert.Greater(t, third.Token, second.Token, "a new store floors tokens at the wall clock")
}

// TestWatchSeesDelete: a watcher of a lease receives it free when the Lease
// is deleted, and held again when a store acquires it.
func TestWatchSeesDelete(t *testing.T) {
	ns := newNamespace(t)
	s := newStore(t, ns)
	states, stop := s.WatchLease("job", time.Minute)
	defer stop()
	watchtest.ExpectState(t, states, elector.Lease{}, 10*time.Second, "never written")
	l, err := newStore(t, ns).TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	watchtest.ExpectState(t, states, l, 10*time.Second, "acquired")
	require.NoError(t, admin(t).CoordinationV1().Leases(ns).Delete(testCtx(t), "job", metav1.DeleteOptions{}))
	watchtest.ExpectState(t, states, elector.Lease{}, 10*time.Second, "deleted")
	l, err = s.TryAcquire(testCtx(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	watchtest.ExpectState(t, states, l, 10*time.Second, "acquired again")
}
