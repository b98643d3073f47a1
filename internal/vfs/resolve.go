package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// maxLinks bounds the symlinks Resolve follows (Linux's MAXSYMLINKS).
const maxLinks = 40

// Resolve returns path made absolute with every symlink in it resolved: the
// part that exists through filepath.EvalSymlinks, a dangling symlink through
// its target, and the rest appended as given. So two names of one
// directory, or of one directory still to be made, resolve alike. It asks
// the operating system, whatever FS the caller uses: the paths of a Config
// are the OS's (a MemFS has no symlinks, and its paths resolve as the OS
// sees their existing part). The error is filepath.Abs's, EvalSymlinks' for
// a reason other than a missing component (a permission), or one for a
// chain of more than 40 symlinks (a loop).
func Resolve(path string) (string, error) {
	for range maxLinks {
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", err
		}
		real, target, err := resolveExisting(abs)
		if err != nil || target == "" {
			return real, err
		}
		path = target // a dangling symlink: resolve its target, and the rest
	}
	return "", fmt.Errorf("resolve %s: more than %d symlinks", path, maxLinks)
}

// resolveExisting resolves the longest prefix of abs that exists and
// appends the rest. If the first missing component is a dangling symlink,
// it returns instead the path to resolve next: the link's target joined with
// what follows it.
func resolveExisting(abs string) (real, next string, err error) {
	rest := ""
	for d := abs; ; d = filepath.Dir(d) {
		r, err := filepath.EvalSymlinks(d)
		if err == nil {
			return filepath.Join(r, rest), "", nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", "", err
		}
		if link, lerr := os.Readlink(d); lerr == nil {
			if !filepath.IsAbs(link) {
				// Relative to the directory holding the link, which exists.
				parent, err := filepath.EvalSymlinks(filepath.Dir(d))
				if err != nil {
					return "", "", err
				}
				link = filepath.Join(parent, link)
			}
			return "", filepath.Join(link, rest), nil
		}
		if d == filepath.Dir(d) {
			return abs, "", nil
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}
