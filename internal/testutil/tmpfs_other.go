//go:build !linux

package testutil

import "testing"

// MountTmpfs skips the test: mounting a tmpfs is implemented on Linux only.
func MountTmpfs(t testing.TB, dir, opts string) {
	t.Helper()
	t.Skip("tmpfs mounts are implemented on Linux only")
}

// RemountTmpfs is never reached off Linux (MountTmpfs skips).
func RemountTmpfs(t testing.TB, dir, opts string) {
	t.Helper()
	t.Skip("tmpfs mounts are implemented on Linux only")
}
