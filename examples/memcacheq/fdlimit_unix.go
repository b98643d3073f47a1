//go:build unix

package main

import "syscall"

// fdLimit returns the process's limit on open descriptors (RLIMIT_NOFILE,
// the soft limit, which Go raises to the hard one at start).
func fdLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return rl.Cur, true
}
