package apiservertest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/leaderaware/leaderaware/elector"
	"github.com/leaderaware/leaderaware/internal/testing/notifytest"
	"github.com/leaderaware/leaderaware/k8slease"
)

// TestRBAC: a ServiceAccount without rights on Leases fails its first
// campaign with an error that names the verb, the resource, the namespace
// and the fix; with the Role of the package documentation it campaigns,
// watches, renews and releases.
func TestRBAC(t *testing.T) {
	ns := newNamespace(t)
	cfg := rest.CopyConfig(server.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":jobs"}
	s, err := k8slease.New(client(t, cfg), ns)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	e, err := elector.New(s, "job", elector.Config{Holder: "a", TTL: 2 * time.Second})
	require.NoError(t, err)

	_, err = e.Campaign(testCtx(t))
	require.Error(t, err)
	for _, want := range []string{`cannot get resource "leases"`, `in API group "coordination.k8s.io"`, `in the namespace "` + ns + `"`, "Role"} {
		assert.ErrorContains(t, err, want)
	}
	t.Log(err)

	// The Role of the package documentation, bound to the ServiceAccount.
	_, err = admin(t).RbacV1().Roles(ns).Create(testCtx(t), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "leaderaware"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin(t).RbacV1().RoleBindings(ns).Create(testCtx(t), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "leaderaware"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "leaderaware"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "jobs", Namespace: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var term elector.Term
	require.Eventually(t, func() bool { // the authorizer's cache takes a moment
		term, err = e.Campaign(testCtx(t))
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "the Role allows a campaign")
	got, err := s.GetMany(testCtx(t), []string{"job"})
	require.NoError(t, err, "the Role allows a bulk read")
	assert.Equal(t, []elector.Lease{term.Lease()}, got)
	changes := notifytest.New()
	defer s.Notify(changes.Changed)()
	changes.Expect(t, 10*time.Second, "the Role allows the watch", notifytest.ReadAll)
	r, err := s.Renew(testCtx(t), term.Lease(), 2*time.Second)
	require.NoError(t, err, "the Role allows a renewal")
	changes.ExpectState(t, 10*time.Second, r, "renewed")
	term.Abandon()
	require.NoError(t, s.Release(testCtx(t), r))
	changes.ExpectState(t, 10*time.Second, elector.Lease{Name: "job"}, "released")
}
