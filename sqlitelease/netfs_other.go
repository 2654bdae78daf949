//go:build !linux

package sqlitelease

// networkFSName reports no network filesystem: outside Linux the store does
// not detect them, and the caller must not put the file on one.
func networkFSName(string) (string, error) { return "", nil }
