package apiservertest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/elector/electortest"
	"github.com/leaderaware/leaderaware/internal/testing/notifytest"
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

// TestNotify: Notify pushes what another Store writes as Known states (an
// acquire, a renewal, a release, a delete), and a read of everything when
// the watch starts; the last stop ends the watch, and a Notify after it
// starts one anew.
func TestNotify(t *testing.T) {
	ns := newNamespace(t)
	s, other := newStore(t, ns), newStore(t, ns)
	r := notifytest.New()
	stop := s.Notify(r.Changed)
	r.Expect(t, 10*time.Second, "the watch starts", notifytest.ReadAll)
	l, err := other.TryAcquire(testCtx(t), "job", "a", time.Minute, elector.Lease{})
	require.NoError(t, err)
	got := r.ExpectState(t, 10*time.Second, l, "acquired")
	assert.Equal(t, l, got.State)
	l, err = other.Renew(testCtx(t), l, 2*time.Minute)
	require.NoError(t, err)
	r.ExpectState(t, 10*time.Second, l, "renewed")
	require.NoError(t, other.Release(testCtx(t), l))
	r.ExpectState(t, 10*time.Second, elector.Lease{Name: "job"}, "released")
	l, err = other.TryAcquire(testCtx(t), "job", "b", time.Minute, elector.Lease{})
	require.NoError(t, err)
	r.ExpectState(t, 10*time.Second, l, "acquired again")
	require.NoError(t, admin(t).CoordinationV1().Leases(ns).Delete(testCtx(t), "job", metav1.DeleteOptions{}))
	r.ExpectState(t, 10*time.Second, elector.Lease{Name: "job"}, "deleted")

	stop()
	stop()
	n := r.Len()
	_, err = other.TryAcquire(testCtx(t), "job", "c", time.Minute, elector.Lease{})
	require.NoError(t, err)
	again := notifytest.New()
	defer s.Notify(again.Changed)()
	again.Expect(t, 10*time.Second, "a new watch after the last stop", notifytest.ReadAll)
	assert.Equal(t, n, r.Len(), "a stopped callback must not be called")
}

// TestGetMany: GetMany returns the state of every name in order, held,
// released, deleted or never written, from one List of the namespace, and
// a Lease that does not decode as free, for TryAcquire to report.
func TestGetMany(t *testing.T) {
	ns := newNamespace(t)
	s := newStore(t, ns)
	names := []string{"held", "released", "deleted", "never", "Encoded Name", "bad"}
	want := make([]elector.Lease, len(names))
	for i, name := range names {
		want[i] = elector.Lease{Name: name}
		if name == "never" {
			continue
		}
		l, err := s.TryAcquire(testCtx(t), name, "a", time.Minute, elector.Lease{})
		require.NoError(t, err)
		switch name {
		case "held", "Encoded Name":
			want[i] = l
		case "released":
			require.NoError(t, s.Release(testCtx(t), l))
		case "deleted":
			require.NoError(t, admin(t).CoordinationV1().Leases(ns).Delete(testCtx(t), name, metav1.DeleteOptions{}))
		case "bad":
			obj, err := admin(t).CoordinationV1().Leases(ns).Get(testCtx(t), name, metav1.GetOptions{})
			require.NoError(t, err)
			obj.Annotations[k8slease.AnnotationToken] = "x"
			_, err = admin(t).CoordinationV1().Leases(ns).Update(testCtx(t), obj, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
	}
	got, err := s.GetMany(testCtx(t), names)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = s.TryAcquire(testCtx(t), "bad", "a", time.Minute, elector.Lease{})
	require.ErrorContains(t, err, k8slease.AnnotationToken)
	_, err = s.GetMany(testCtx(t), []string{"held", ""})
	require.Error(t, err, "an invalid name")
}
