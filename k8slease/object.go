package k8slease

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leaderaware/leaderaware/elector"
)

// The annotations of a Lease object that leaderaware writes. The spec
// fields are kept as client-go's leader election writes them.
const (
	// AnnotationToken is the fencing token of the last term leaderaware
	// started on the Lease, in decimal.
	AnnotationToken = "leaderaware.io/token"
	// AnnotationHolder is the holder of that term. When it differs from
	// spec.holderIdentity, another elector (client-go's) holds the Lease.
	AnnotationHolder = "leaderaware.io/holder"
	// AnnotationTTL is that term's TTL in milliseconds; spec.
	// leaseDurationSeconds is the TTL rounded up to whole seconds, plus one.
	AnnotationTTL = "leaderaware.io/ttl-ms"
)

// foreignTTL is the TTL of a Lease held by another elector that gives no
// leaseDurationSeconds: client-go's default LeaseDuration.
const foreignTTL = 15 * time.Second

// record is what a Lease object says about its lease.
type record struct {
	version uint64 // the resourceVersion
	holder  string // spec.holderIdentity; "" if the lease is free
	token   uint64 // AnnotationToken, 0 if absent
	ours    bool   // the holder is leaderaware's term of token
	ttl     time.Duration
	written time.Time // renewTime, for display
	// transitions is spec.leaseTransitions.
	transitions int32
}

// parseVersion returns a resourceVersion as the Version of a lease.
// resourceVersions are opaque to clients, but the API server on etcd makes
// them etcd's revision in decimal, which grows with every write to the
// cluster and never goes back; k8slease relies on that and refuses any
// other resourceVersion.
func parseVersion(obj string, rv string) (uint64, error) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("k8slease: Lease %q has resourceVersion %q, not a positive decimal integer; "+
			"k8slease needs an API server that stores in etcd, whose resourceVersions are etcd revisions", obj, rv)
	}
	return v, nil
}

// decode reads a Lease object.
func decode(obj *coordinationv1.Lease) (record, error) {
	var r record
	var err error
	if r.version, err = parseVersion(obj.Name, obj.ResourceVersion); err != nil {
		return r, err
	}
	sp := obj.Spec
	r.holder = ptr.Deref(sp.HolderIdentity, "")
	r.transitions = ptr.Deref(sp.LeaseTransitions, 0)
	switch {
	case sp.RenewTime != nil:
		r.written = sp.RenewTime.UTC()
	case sp.AcquireTime != nil:
		r.written = sp.AcquireTime.UTC()
	default:
		r.written = obj.CreationTimestamp.UTC()
	}
	if s, ok := obj.Annotations[AnnotationToken]; ok {
		if r.token, err = strconv.ParseUint(s, 10, 64); err != nil {
			return r, fmt.Errorf("k8slease: Lease %q has annotation %s=%q, not a token; delete the annotation or the Lease", obj.Name, AnnotationToken, s)
		}
	}
	r.ours = r.token != 0 && r.holder != "" && obj.Annotations[AnnotationHolder] == r.holder
	if r.ours {
		ms, err := strconv.ParseInt(obj.Annotations[AnnotationTTL], 10, 64)
		if err != nil || ms <= 0 {
			return r, fmt.Errorf("k8slease: Lease %q has annotation %s=%q, not a TTL in milliseconds; delete the annotation or the Lease",
				obj.Name, AnnotationTTL, obj.Annotations[AnnotationTTL])
		}
		r.ttl = time.Duration(ms) * time.Millisecond
	} else if d := ptr.Deref(sp.LeaseDurationSeconds, 0); d > 0 {
		r.ttl = time.Duration(d) * time.Second
	} else {
		r.ttl = foreignTTL
	}
	return r, nil
}

// lease returns the lease of r, named name, or the zero Lease if it is
// free. A term of another elector has no token of its own: it gets the
// largest token known of the name (high), so that a candidate watching the
// lease takes it for a newer state than the terms before it.
func (r record) lease(name string, high uint64) elector.Lease {
	if r.holder == "" {
		return elector.Lease{}
	}
	l := elector.Lease{Name: name, Holder: r.holder, Token: r.token, Version: r.version, TTL: r.ttl, Written: r.written}
	if !r.ours {
		l.Token = max(r.token, high, 1)
	}
	return l
}

// same reports whether r is exactly the state of observed. Beyond the
// Version, which the update then carries as its compare-and-set, it
// compares the holder and the renewal time to the microsecond, so that a
// resourceVersion repeated by an etcd restore without --bump-revision
// cannot pass for the state the candidate watched.
func (r record) same(observed elector.Lease) bool {
	return observed.Token != 0 && r.holder != "" && r.version == observed.Version &&
		r.holder == observed.Holder && r.written.Equal(observed.Written)
}

// leaseSeconds is leaseDurationSeconds for ttl: whole seconds, rounded up,
// and one more. client-go candidates compare renewTime in whole seconds, so
// their expiry clock may start up to a second before the holder's last
// renewal.
func leaseSeconds(ttl time.Duration) int32 {
	return int32(min((ttl+time.Second-1)/time.Second+1, math.MaxInt32))
}

// ttlMillis is AnnotationTTL for ttl: milliseconds, rounded up, so that a
// candidate never watches the lease for less than its TTL.
func ttlMillis(ttl time.Duration) string {
	return strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
}

// startTerm makes obj hold a new term of holder with token, as client-go
// writes an acquisition.
func startTerm(obj *coordinationv1.Lease, holder string, ttl time.Duration, token uint64, now time.Time) {
	if obj.Annotations == nil {
		obj.Annotations = make(map[string]string)
	}
	obj.Annotations[AnnotationToken] = strconv.FormatUint(token, 10)
	obj.Annotations[AnnotationHolder] = holder
	obj.Annotations[AnnotationTTL] = ttlMillis(ttl)
	transitions := ptr.Deref(obj.Spec.LeaseTransitions, 0)
	if ptr.Deref(obj.Spec.HolderIdentity, "") != holder && transitions < math.MaxInt32 {
		transitions++
	}
	obj.Spec.HolderIdentity = ptr.To(holder)
	obj.Spec.LeaseDurationSeconds = ptr.To(leaseSeconds(ttl))
	obj.Spec.AcquireTime = &metav1.MicroTime{Time: now}
	obj.Spec.RenewTime = &metav1.MicroTime{Time: now}
	obj.Spec.LeaseTransitions = ptr.To(transitions)
}

// patchOp is one operation of a JSON patch (RFC 6902).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// annotationPath is the JSON pointer of an annotation.
func annotationPath(key string) string {
	return "/metadata/annotations/" + jsonPointerEscape(key)
}

func jsonPointerEscape(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			b = append(b, '~', '0')
		case '/':
			b = append(b, '~', '1')
		default:
			b = append(b, s[i])
		}
	}
	return string(b)
}

// termPatch is a JSON patch that applies ops only if the Lease still holds
// l's term: the API server applies the patch to the object as it is and
// writes the result with a compare-and-set, so the tests and the write are
// one atomic step.
func termPatch(l elector.Lease, ops ...patchOp) []byte {
	all := append([]patchOp{
		{"test", annotationPath(AnnotationToken), strconv.FormatUint(l.Token, 10)},
		{"test", annotationPath(AnnotationHolder), l.Holder},
		{"test", "/spec/holderIdentity", l.Holder},
	}, ops...)
	b, err := json.Marshal(all)
	if err != nil {
		panic(err) // strings, numbers and MicroTimes always marshal
	}
	return b
}

// renewPatch renews l's term with ttl at now.
func renewPatch(l elector.Lease, ttl time.Duration, now time.Time) []byte {
	return termPatch(l,
		patchOp{"add", annotationPath(AnnotationTTL), ttlMillis(ttl)},
		patchOp{"add", "/spec/leaseDurationSeconds", leaseSeconds(ttl)},
		patchOp{"add", "/spec/renewTime", metav1.MicroTime{Time: now}},
	)
}

// releasePatch releases l's term at now as client-go's ReleaseOnCancel
// does: no holder, a lease duration of one second, acquireTime and
// renewTime now. The token annotation stays, for the next term's token.
func releasePatch(l elector.Lease, now time.Time) []byte {
	return termPatch(l,
		patchOp{"add", "/spec/holderIdentity", ""},
		patchOp{"add", "/spec/leaseDurationSeconds", 1},
		patchOp{"add", "/spec/acquireTime", metav1.MicroTime{Time: now}},
		patchOp{"add", "/spec/renewTime", metav1.MicroTime{Time: now}},
	)
}
