package elector

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest lease or holder name, in bytes.
const MaxNameLen = 255

// ValidateName returns nil if name is a valid lease name: 1 to 255 bytes of
// printable UTF-8 (letters, marks, numbers, punctuation, symbols and the ASCII
// space). Otherwise the error names the value and what is wrong with it.
// Stores call it so that every store refuses the same names.
func ValidateName(name string) error { return validName("lease name", name) }

// ValidateHolder returns nil if holder is a valid holder name, under the same
// rules as a lease name, and otherwise an error naming the value.
func ValidateHolder(holder string) error { return validName("holder", holder) }

func validName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("elector: %s is empty; it must be 1–%d bytes of printable UTF-8", what, MaxNameLen)
	case len(name) > MaxNameLen:
		return fmt.Errorf("elector: %s %.40q… is %d bytes; at most %d are allowed", what, name, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("elector: %s %q is not valid UTF-8", what, name)
	}
	for i, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("elector: %s %q has a non-printable character %U at byte %d", what, name, r, i)
		}
	}
	return nil
}

// ValidateTTL returns nil if ttl is positive and at most [MaxTTL], and an
// error naming it otherwise. Stores call it on every TryAcquire and Renew.
func ValidateTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxTTL {
		return fmt.Errorf("elector: lease TTL %v must be positive and at most %v", ttl, MaxTTL)
	}
	return nil
}
