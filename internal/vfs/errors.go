package vfs

import (
	"io/fs"
	"os"
)

// Named wraps err, the error of one call into an FS, for a caller whose
// what already names the operation and the file ("create log 7 in /d"):
// the message is what, ": " and the cause alone, without the
// *fs.PathError's (or *os.LinkError's) own operation and path, which would
// say them a second time ("create log 7 in /d: create /d/log-0000000007:
// ..."). errors.Is and errors.As see err as it is.
func Named(what string, err error) error { return &namedError{what: what, err: err} }

type namedError struct {
	what string
	err  error
}

func (e *namedError) Error() string {
	cause := e.err
	switch err := e.err.(type) {
	case *fs.PathError:
		cause = err.Err
	case *os.LinkError:
		cause = err.Err
	}
	return e.what + ": " + cause.Error()
}

func (e *namedError) Unwrap() error { return e.err }
