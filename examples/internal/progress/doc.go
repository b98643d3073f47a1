// Package progress holds what the examples' per-second progress lines
// share: formatting of a channel's fill, of how often and how long Puts
// waited for room (counted by the channel itself: Stats.PutWaits and
// PutWaitTime), and of sizes, rates and shares that stays sane over a
// near-zero interval (format.go).
//
// Everything here is a pure function of its arguments: it opens no files,
// starts no goroutines and keeps no state.
package progress
