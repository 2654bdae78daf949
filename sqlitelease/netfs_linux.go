//go:build linux

package sqlitelease

import (
	"fmt"
	"syscall"
)

// Magic numbers of network, cluster and user-space filesystems (statfs
// f_type), from Linux's include/uapi/linux/magic.h unless noted.
var networkFS = map[uint32]string{
	0x6969:     "NFS",
	0x517B:     "SMB",
	0xFF534D42: "CIFS",
	0xFE534D42: "SMB2",
	0x65735546: "FUSE",
	0x01021997: "9P", // WSL2 and container host shares
	0x00C36400: "CephFS",
	0x5346414F: "AFS",
	0x6B414653: "kAFS",
	0x73757245: "Coda",
	0x7461636F: "OCFS2",
	0x01161970: "GFS2",     // GFS2_MAGIC, include/uapi/linux/gfs2_ondisk.h
	0x0BD00BD0: "Lustre",   // LL_SUPER_MAGIC, lustre/include/uapi/linux/lustre/lustre_user.h
	0x47504653: "GPFS",     // "GPFS", IBM Storage Scale; as in coreutils' src/stat.c
	0x19830326: "BeeGFS",   // BEEGFS_MAGIC, beegfs client_module/source/filesystem/FhgfsOpsSuper.h
	0x20030528: "OrangeFS", // ORANGEFS_SUPER_MAGIC, Linux fs/orangefs/protocol.h
}

// statfsType returns the filesystem type magic of path. Tests replace it.
var statfsType = func(path string) (uint32, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint32(st.Type), nil // magics are 32-bit; Type is int64 or int32 by arch
}

// networkFSName returns the name of the network filesystem that holds path,
// or "" if path is on a local filesystem.
func networkFSName(path string) (string, error) {
	magic, err := statfsType(path)
	if err != nil {
		return "", err
	}
	if name, ok := networkFS[magic]; ok {
		return fmt.Sprintf("%s (statfs type %#x)", name, magic), nil
	}
	return "", nil
}
