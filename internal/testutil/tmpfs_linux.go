package testutil

import (
	"os"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs with the given options (e.g. "size=4m") at dir,
// creating dir, and unmounts it when the test ends. It skips the test when
// mounting is not permitted (not root, or in a container without the
// capability).
func MountTmpfs(t testing.TB, dir, opts string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Skipf("cannot mount a tmpfs at %s (needs root): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Still busy (a failed test left files open): detach it.
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
}

// RemountTmpfs changes the options (e.g. a larger size) of the tmpfs
// MountTmpfs mounted at dir.
func RemountTmpfs(t testing.TB, dir, opts string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, opts); err != nil {
		t.Fatalf("remount %s with %s: %v", dir, opts, err)
	}
}
