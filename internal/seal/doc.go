// Package seal is the authenticated encryption of log records at rest: the
// keys of one encrypted log file, derived from a master key, and the
// sealing and opening of one record's body under them.
//
// It is the cryptographic core of encryption at rest (issue 18): the log
// format's encrypted versions (logfile/keys.go) and the channel's
// Config.Keys build on it.
//
// # Keys
//
// Each encrypted log file has its own keys, derived with HKDF-SHA256
// (RFC 5869) from the 32-byte master key that the file's key id names:
//
//	prk   = HKDF-Extract(salt = "filechannel log keys v1" || file id (uint32 BE) || file salt (uint64 BE),
//	                     ikm  = master key)
//	key   = HKDF-Expand(prk, info = "record encryption", 32 bytes)   AES-256-GCM key
//	check = HKDF-Expand(prk, info = "key check", 16 bytes)           key-check value
//
// A file bound to its channel (DeriveBound, log format version 6) has the
// channel's 16-byte id (channel.id) in the HKDF salt as well:
//
//	salt  = "filechannel log keys v2" || file id (uint32 BE) || file salt (uint64 BE) || channel id
//
// so that two channels with the same master key never share a file's keys:
// a file copied from one into the other neither matches its check value
// nor opens.
//
// The file salt is the 8 random bytes every log header carries (format.md
// §3.1), so two files never share keys unless their ids and salts both
// repeat. The key-check value goes in the file's header: a reader derives
// it from the master key it was given and compares, so a wrong key is an
// error before any record is read, never a record that fails to
// authenticate. It reveals nothing of the keys: HKDF's outputs for
// different infos are independent.
//
// # Records
//
// A record body is sealed with AES-256-GCM under the file's key:
//
//	nonce = frame offset (uint32 BE) || write-order id (uint64 BE)             12 bytes
//	ad    = "FCRE" || file id (uint32 BE) || frame offset (uint32 BE) ||
//	        payload length (uint32 BE) || record type (1 byte) ||
//	        transaction id (uint64 BE) || write-order id (uint64 BE)          33 bytes
//	        [|| commit time (uint64 BE), a put of log format version 8]     41 bytes
//	out   = ciphertext (as long as the body) || 16-byte tag
//
// A nonce never repeats under one key: the key is the file's own, and in
// one file a frame offset holds one record, ever (records are only added
// after the last one; a failed write's truncation retires the file, and a
// repair's padding is not encrypted). The write-order id, unique over the
// channel's life, is in the nonce as well, so a repeat would need both to
// repeat. The additional data binds the record to its file, offset, length,
// type and ids (and, in version 8, its commit time): a record copied to
// another offset or file, or whose fixed fields or time are changed, fails
// to open.
package seal
