//go:build linux

package sqlitelease

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestNetworkFSDanglingSymlink opens a path that is a symbolic link to a
// file not created yet, in a directory on NFS: the file would be created
// there, so Open must refuse it as it refuses the target path itself.
func TestNetworkFSDanglingSymlink(t *testing.T) {
	nfs := t.TempDir()
	orig := statfsType
	t.Cleanup(func() { statfsType = orig })
	statfsType = func(path string) (uint32, error) {
		if path == nfs || strings.HasPrefix(path, nfs+"/") {
			return 0x6969, nil
		}
		return orig(path)
	}

	link := filepath.Join(t.TempDir(), "leases.db")
	require.NoError(t, os.Symlink(filepath.Join(nfs, "leases.db"), link))
	s, err := Open(link)
	if err == nil {
		_ = s.Close()
		t.Fatal("Open through a dangling link into NFS succeeded")
	}
	t.Log(err)
	require.ErrorIs(t, err, ErrNetworkFS)
	assert.Contains(t, err.Error(), link)
	assert.Contains(t, err.Error(), nfs)
	entries, err := os.ReadDir(nfs)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing created on NFS")
}

// TestClusterFSNames: the cluster filesystems, which give SQLite no
// reliable locks across hosts either, are refused with the others.
func TestClusterFSNames(t *testing.T) {
	for magic, want := range map[uint32]string{
		0x7461636f: "OCFS2", 0x01161970: "GFS2", 0x0BD00BD0: "Lustre",
		0x47504653: "GPFS", 0x19830326: "BeeGFS", 0x20030528: "OrangeFS",
	} {
		got, ok := networkFS[magic]
		assert.True(t, ok && got == want, "statfs type %#x: got %q, want %s", magic, got, want)
	}
}
