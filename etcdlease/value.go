package etcdlease

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderaware/leaderaware/elector"
)

// record is the value of a lease key, as JSON with the fields in this order:
//
//	{"released":false,"token":0,"holder":"web-1","ttl":"15s","written":"2026-11-30T05:03:39.1Z"}
//
// The order matters: the compare-and-sets match the value's leading bytes
// (see valuePrefix), so a field that a compare reads must come before every
// field that changes within a term.
type record struct {
	Released bool `json:"released"`
	// Token is the term's fencing token, or 0 on the write that started
	// the term: that write's revision is the token (etcd assigns it only as
	// it commits the write).
	Token   uint64    `json:"token"`
	Holder  string    `json:"holder"`
	TTL     string    `json:"ttl"`     // time.Duration.String, exact
	Written time.Time `json:"written"` // the writer's wall clock, for display
}

func (r record) encode() string { return marshal(r) }

// marshal is json.Marshal without HTML escaping, so that holders read in
// etcdctl as written. It never fails on the strings, bools, numbers and
// times it is given.
func marshal(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("etcdlease: marshal %+v: %v", v, err))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// decodeLease returns the lease that kv holds.
func decodeLease(name string, kv *mvccpb.KeyValue) (l elector.Lease, released bool, err error) {
	var r record
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return l, false, notALease(kv, err)
	}
	ttl, err := time.ParseDuration(r.TTL)
	if err != nil || r.Holder == "" {
		return l, false, notALease(kv, fmt.Errorf("holder %q, ttl %q", r.Holder, r.TTL))
	}
	l = elector.Lease{
		Name:    name,
		Holder:  r.Holder,
		Token:   r.Token,
		Version: uint64(kv.ModRevision),
		TTL:     ttl,
		Written: r.Written,
	}
	if l.Token == 0 {
		l.Token = uint64(kv.ModRevision)
	}
	return l, r.Released, nil
}

func notALease(kv *mvccpb.KeyValue, err error) error {
	return fmt.Errorf("etcdlease: key %q holds %.80q, which is not a lease written by etcdlease "+
		"(delete the key to free the lease): %w", kv.Key, kv.Value, err)
}

// valuePrefix returns the leading bytes of every encoded record with these
// Released and Token fields and, if holder is not nil, this Holder.
func valuePrefix(released bool, token uint64, holder *string) string {
	p := `{"released":` + strconv.FormatBool(released) + `,"token":` + strconv.FormatUint(token, 10) + `,`
	if holder != nil {
		p += `"holder":` + marshal(*holder) + `,`
	}
	return p
}

// hasPrefix returns the compares that hold when the value of key starts
// with p. p ends in ',', so values with the prefix sort strictly between p
// and p with that ',' raised to '-'; a missing key fails every value compare.
func hasPrefix(key, p string) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(key), ">", p),
		clientv3.Compare(clientv3.Value(key), "<", p[:len(p)-1]+"-"),
	}
}

// isObserved returns the compares that hold when key is still exactly the
// unreleased lease o: the same write (Version is the key's ModRevision), of
// the same term.
func isObserved(key string, o elector.Lease) []clientv3.Cmp {
	token := o.Token
	if o.Token == o.Version {
		token = 0 // o is the write that started its term
	}
	return append(hasPrefix(key, valuePrefix(false, token, nil)),
		clientv3.Compare(clientv3.ModRevision(key), "=", int64(o.Version)))
}
