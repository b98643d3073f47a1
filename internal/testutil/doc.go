// Package testutil holds helpers shared by the tests of several packages:
// today, a real small filesystem that fills up (a tmpfs, Linux and root
// only) for full-disk tests.
package testutil
