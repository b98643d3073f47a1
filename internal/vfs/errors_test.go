package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

// TestNamedSaysTheOperationOnce: Named's message leaves out the operation
// and path of a *fs.PathError or *os.LinkError, which its caller names,
// and keeps any other error's message; errors.Is and errors.As see the
// wrapped error.
func TestNamedSaysTheOperationOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"path_error", &fs.PathError{Op: "create", Path: "/d/log-0000000007", Err: syscall.ENOSPC},
			"create log 7 in /d: no space left on device"},
		{"link_error", &os.LinkError{Op: "rename", Old: "/d/a", New: "/d/b", Err: syscall.EIO},
			"create log 7 in /d: input/output error"},
		{"other_error", errors.New("capacity out of range"), "create log 7 in /d: capacity out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Named("create log 7 in /d", tc.err)
			if got := err.Error(); got != tc.want {
				t.Errorf("message %q, want %q", got, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("errors.Is(%v, the wrapped error) = false", err)
			}
		})
	}
	var pe *fs.PathError
	if err := Named("x", &fs.PathError{Op: "create", Path: "/x", Err: syscall.ENOSPC}); !errors.As(err, &pe) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("errors.As/Is through Named(%v) fail", err)
	}
}
