package k8slease

import (
	"encoding/base32"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leaderaware/leaderaware/elector"
)

// encodedPrefix starts the object name of every lease name that is not a
// Kubernetes object name of its own (see ObjectName). Lease names that
// start with it are encoded too, so that no two lease names share an
// object.
const encodedPrefix = "b32."

// nameEncoding is base32 in the lowercase extended-hex alphabet, which is
// all lowercase letters and digits, as object names require.
var nameEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// maxEncodedName is the longest lease name that encodes to an object name
// within Kubernetes' 253 characters.
const maxEncodedName = (validation.DNS1123SubdomainMaxLength - len(encodedPrefix)) * 5 / 8

// ObjectName returns the name of the Lease object that holds the lease
// name: name itself if it is a valid object name (a DNS subdomain: at most
// 253 lowercase letters, digits, '-' and '.'), and otherwise "b32." and
// name in base32, which [LeaseName] reverses. A name that is not an object
// name and is longer than 155 bytes is refused with an error.
func ObjectName(name string) (string, error) {
	if err := elector.ValidateName(name); err != nil {
		return "", err
	}
	if len(validation.IsDNS1123Subdomain(name)) == 0 && !strings.HasPrefix(name, encodedPrefix) {
		return name, nil
	}
	if len(name) > maxEncodedName {
		return "", fmt.Errorf("k8slease: lease name %.40q… is not a Kubernetes object name and, at %d bytes, too long to encode as one (at most %d); "+
			"use a name of lowercase letters, digits, '-' and '.', or a shorter one", name, len(name), maxEncodedName)
	}
	return encodedPrefix + nameEncoding.EncodeToString([]byte(name)), nil
}

// LeaseName returns the lease name that the Lease object named obj holds:
// the reverse of [ObjectName].
func LeaseName(obj string) (string, error) {
	rest, ok := strings.CutPrefix(obj, encodedPrefix)
	if !ok {
		return obj, nil
	}
	b, err := nameEncoding.DecodeString(rest)
	if err != nil {
		return "", fmt.Errorf("k8slease: object name %q starts with %q but the rest is not base32: %w", obj, encodedPrefix, err)
	}
	return string(b), nil
}
