//go:build !unix

package main

func fdLimit() (uint64, bool) { return 0, false }
