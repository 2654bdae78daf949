//go:build linux

package sqlitelease

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestNetworkFSRefused swaps the statfs probe for one that reports NFS.
func TestNetworkFSRefused(t *testing.T) {
	orig := statfsType
	t.Cleanup(func() { statfsType = orig })
	statfsType = func(string) (uint32, error) { return 0x6969, nil }

	path := filepath.Join(t.TempDir(), "leases.db")
	s, err := Open(path)
	if err == nil {
		_ = s.Close()
		t.Fatal("Open on NFS succeeded")
	}
	if !errors.Is(err, ErrNetworkFS) {
		t.Errorf("error %v does not match ErrNetworkFS", err)
	}
	for _, want := range []string{path, "NFS", "0x6969", "AllowNetworkFS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	s, err = Open(path, AllowNetworkFS())
	if err != nil {
		t.Fatalf("Open with AllowNetworkFS: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNetworkFSNames(t *testing.T) {
	orig := statfsType
	t.Cleanup(func() { statfsType = orig })
	for magic, want := range map[uint32]string{0x6969: "NFS", 0x517B: "SMB", 0xFF534D42: "CIFS", 0xFE534D42: "SMB2", 0x65735546: "FUSE", 0xEF53: ""} {
		statfsType = func(string) (uint32, error) { return magic, nil }
		got, err := networkFSName("/x")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, want) || (want == "") != (got == "") {
			t.Errorf("networkFSName for %#x = %q, want %s", magic, got, want)
		}
	}
}
