package k8slease

import (
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDecodeForeign: a Lease that client-go's elector wrote (no
// annotations, or ours left from an earlier term) is held by its holder for
// its leaseDurationSeconds, with a token no smaller than any seen.
func TestDecodeForeign(t *testing.T) {
	renew := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	obj := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "job", ResourceVersion: "42",
			Annotations: map[string]string{AnnotationToken: "7", AnnotationHolder: "ours", AnnotationTTL: "1500"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("client-go-1"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: renew}, LeaseTransitions: ptr.To[int32](3)},
	}
	rec, err := decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	l := rec.lease("job", 9)
	if rec.ours || l.Holder != "client-go-1" || l.TTL != 15*time.Second || l.Token != 9 || l.Version != 42 || !l.Written.Equal(renew) {
		t.Errorf("foreign lease = %+v (ours %v)", l, rec.ours)
	}
	obj.Spec.HolderIdentity = ptr.To("ours")
	rec, err = decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if l := rec.lease("job", 9); !rec.ours || l.Token != 7 || l.TTL != 1500*time.Millisecond {
		t.Errorf("our lease = %+v (ours %v)", l, rec.ours)
	}
	obj.Spec.HolderIdentity = ptr.To("")
	if rec, _ = decode(obj); rec.lease("job", 9).Token != 0 {
		t.Error("a Lease without holder is not free")
	}
}

// TestDecodeRefuses: resourceVersions that are not etcd revisions, and
// broken annotations, are errors that name the value.
func TestDecodeRefuses(t *testing.T) {
	for _, tt := range []struct {
		rv, token, want string
	}{
		{"abc", "1", `resourceVersion "abc"`},
		{"0", "1", `resourceVersion "0"`},
		{"5", "x", `leaderaware.io/token="x"`},
	} {
		obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "job", ResourceVersion: tt.rv,
			Annotations: map[string]string{AnnotationToken: tt.token}}}
		if _, err := decode(obj); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("decode(rv %q, token %q) = %v, want an error with %s", tt.rv, tt.token, err, tt.want)
		}
	}
}

func TestLeaseSeconds(t *testing.T) {
	for ttl, want := range map[time.Duration]int32{time.Millisecond: 2, time.Second: 2, 1001 * time.Millisecond: 3, 15 * time.Second: 16} {
		if got := leaseSeconds(ttl); got != want {
			t.Errorf("leaseSeconds(%v) = %d, want %d", ttl, got, want)
		}
	}
}

func TestTTLMillis(t *testing.T) {
	for ttl, want := range map[time.Duration]string{time.Nanosecond: "1", 1500*time.Millisecond + time.Nanosecond: "1501", time.Second: "1000"} {
		if got := ttlMillis(ttl); got != want {
			t.Errorf("ttlMillis(%v) = %s, want %s", ttl, got, want)
		}
	}
}

func TestAnnotationPath(t *testing.T) {
	if got := annotationPath("leaderaware.io/ttl~ms"); got != "/metadata/annotations/leaderaware.io~1ttl~0ms" {
		t.Errorf("annotationPath = %q", got)
	}
}
