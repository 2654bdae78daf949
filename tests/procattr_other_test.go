//go:build !linux

package tests

import "syscall"

func dieWithParent() *syscall.SysProcAttr { return nil }
