// Package testutil holds helpers shared by the tests of several packages: a
// real small filesystem that fills up (a tmpfs, Linux and root only) for
// full-disk tests, and files as a newer release would write them (a newer
// format version, a record of an unknown type) with snapshots to check that
// nothing refusing them changed a byte, for the compatibility tests; and
// the bytes the files under a directory hold (DirBytes).
package testutil
