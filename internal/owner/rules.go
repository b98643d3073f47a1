package owner

// This file has the rules that keep every directory with one channel
// (docs/format.md §1.1): ReadOwners and what it returns.

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/flumego/filechannel/internal/corrupt"
	"github.com/flumego/filechannel/internal/vfs"
)

// Options names the directories of a channel for ReadOwners.
type Options struct {
	FS                  vfs.FS
	CheckpointDir       string
	BackupCheckpointDir string // "" = none
	DataDirs            []string
}

// Owners is what the channel.id files of a channel's directories say, and
// what Open does about it (ReadOwners).
type Owners struct {
	// ID is the channel's id: the one its directories record, or a new one
	// (New) when none records one that is this channel's.
	ID  ID
	New bool
	// CheckpointDir is the checkpoint dir, absolute with symlinks resolved:
	// what every directory's channel.id is to record.
	CheckpointDir string
	// Dirs lists the checkpoint dir, the backup dir (if any), then the data
	// dirs in order.
	Dirs []OwnedDir
	// Foreign lists the directories of another channel; Damaged the
	// errors (each a *corrupt.Error, wrapped with the directory) of
	// channel.id files that do not decode and that nothing vouches for
	// (rule 4). Either makes Err not nil.
	Foreign []*ForeignDirError
	Damaged []error
}

// OwnedDir is one directory's channel.id.
type OwnedDir struct {
	Role  string // the Config field naming it: "CheckpointDir", "BackupCheckpointDir", "DataDirs[i]"
	Dir   string
	Data  bool   // a data dir (its file is logfile's), else a checkpoint dir (checkpoint's)
	Found *Owner // what it records; nil when it has no channel.id, or a damaged one
	// Write: the directory is this channel's, and its channel.id is
	// missing or records another checkpoint dir (the channel moved it), or
	// is damaged and healed (Healed): Open writes ID and CheckpointDir
	// there.
	Write bool
	// Healed is the damage (a *corrupt.Error, wrapped with the directory)
	// of a checkpoint or backup dir's channel.id that every data dir
	// vouches for (rule 4): Open rewrites the file, logs and counts it.
	Healed error
}

// Err returns the error Open, Repair and Rebuild refuse the directories
// with: the first damaged channel.id that is not healed, else the first
// *ForeignDirError; nil when every directory is this channel's or records
// none.
func (o *Owners) Err() error {
	if len(o.Damaged) > 0 {
		return o.Damaged[0]
	}
	if len(o.Foreign) > 0 {
		return o.Foreign[0]
	}
	return nil
}

// ReadOwners reads the channel.id of every directory of a channel and
// applies the rules that keep a directory with one channel
// (docs/format.md §1.1). Let C be the checkpoint dir, resolved:
//
//  1. The channel's id is the one C's channel.id records; without one (a
//     new channel, a lost checkpoint dir, or files an older release wrote),
//     the id of the first other directory whose channel.id records C (the
//     same channel, whose checkpoint dir lost its files); else a new id.
//  2. A directory whose channel.id records another id belongs to another
//     channel: Foreign. So is one that records a checkpoint dir other than
//     C when C records no id and no directory records C: the data dir of
//     another channel must not be taken over by a new one.
//  3. A directory without a channel.id (a new one, or an older release's)
//     is this channel's, as is one that records this id with another
//     checkpoint dir (the channel's dirs were moved): Open writes it
//     (OwnedDir.Write).
//  4. A channel.id that does not decode is damage, refused (Damaged), with
//     one exception: the checkpoint dir's or the backup dir's is healed
//     (OwnedDir.Healed, Write) when every data dir vouches for the
//     channel: each has an intact channel.id, all record the same id, and
//     all record C (and the other checkpoint-side file, if intact, records
//     that id too). The damaged file is then read as if it were missing
//     (rules 1 to 3 apply to what is left).
//
// It only reads. Its errors are I/O errors and a channel.id a newer release
// wrote (a *corrupt.FormatError): damaged files are in Damaged.
func ReadOwners(opts Options) (*Owners, error) {
	ck, err := vfs.Resolve(opts.CheckpointDir)
	if err != nil {
		return nil, fmt.Errorf("resolve checkpoint dir %s: %w", opts.CheckpointDir, err)
	}
	o := &Owners{CheckpointDir: ck}
	var damaged []error // by directory, as Dirs
	read := func(role, dir string, data bool) error {
		rec, ok, err := Read(opts.FS, dir)
		var bad error
		if errors.Is(err, corrupt.ErrCorrupt) {
			bad = fmt.Errorf("%s %s: %w", role, dir, err)
		} else if err != nil {
			return fmt.Errorf("%s %s: %w", role, dir, err)
		}
		d := OwnedDir{Role: role, Dir: dir, Data: data}
		if ok {
			d.Found = &rec
		}
		o.Dirs = append(o.Dirs, d)
		damaged = append(damaged, bad)
		return nil
	}
	if err := read("CheckpointDir", opts.CheckpointDir, false); err != nil {
		return nil, err
	}
	if opts.BackupCheckpointDir != "" {
		if err := read("BackupCheckpointDir", opts.BackupCheckpointDir, false); err != nil {
			return nil, err
		}
	}
	for i, d := range opts.DataDirs {
		if err := read(fmt.Sprintf("DataDirs[%d]", i), d, true); err != nil {
			return nil, err
		}
	}
	o.heal(damaged)
	o.pickID()
	for i := range o.Dirs {
		o.judge(&o.Dirs[i])
	}
	return o, nil
}

// heal applies rule 4 to the damage read found in each directory (nil
// where its channel.id decoded or is missing).
func (o *Owners) heal(damaged []error) {
	why := o.unvouched()
	for i, err := range damaged {
		d := &o.Dirs[i]
		switch {
		case err == nil:
		case !d.Data && why == "":
			d.Healed = err
		case d.Data:
			o.Damaged = append(o.Damaged, fmt.Errorf("%w; if the directory is this channel's, delete the file and its id is recorded again", err))
		default:
			o.Damaged = append(o.Damaged, fmt.Errorf("%w; not rewritten by itself, as %s; if the directory is this channel's, delete the file and its id is recorded again", err, why))
		}
	}
}

// unvouched says why the data dirs do not vouch for the channel (rule 4),
// or "" when they do: each has an intact channel.id recording C, all with
// one id, which the intact checkpoint-side files record too.
func (o *Owners) unvouched() string {
	var first *OwnedDir
	for i := range o.Dirs {
		d := &o.Dirs[i]
		if !d.Data {
			continue
		}
		switch {
		case d.Found == nil:
			return fmt.Sprintf("%s %s has no intact channel.id to vouch for it", d.Role, d.Dir)
		case d.Found.CheckpointDir != o.CheckpointDir:
			return fmt.Sprintf("%s %s records checkpoint dir %s, not %s", d.Role, d.Dir, d.Found.CheckpointDir, o.CheckpointDir)
		case first == nil:
			first = d
		case d.Found.ID != first.Found.ID:
			return fmt.Sprintf("%s %s records channel %s, but %s %s records channel %s", d.Role, d.Dir, d.Found.ID, first.Role, first.Dir, first.Found.ID)
		}
	}
	if first == nil {
		return "no data dir vouches for it"
	}
	for _, d := range o.Dirs {
		if !d.Data && d.Found != nil && d.Found.ID != first.Found.ID {
			return fmt.Sprintf("%s %s records channel %s, but %s %s records channel %s", d.Role, d.Dir, d.Found.ID, first.Role, first.Dir, first.Found.ID)
		}
	}
	return ""
}

// pickID sets ID and New (rule 1).
func (o *Owners) pickID() {
	if main := o.Dirs[0].Found; main != nil {
		o.ID = main.ID
		return
	}
	for _, d := range o.Dirs[1:] {
		if d.Found != nil && d.Found.CheckpointDir == o.CheckpointDir {
			o.ID = d.Found.ID
			return
		}
	}
	o.ID, o.New = NewID(), true
}

// judge applies rules 2 and 3 to d.
func (o *Owners) judge(d *OwnedDir) {
	switch {
	case d.Found == nil:
		// No file, or a damaged one (in Damaged: Err refuses first).
		d.Write = true
	case d.Found.ID != o.ID:
		fe := &ForeignDirError{Role: d.Role, Dir: d.Dir, File: filepath.Join(d.Dir, FileName),
			Owner: d.Found.ID.String(), OwnerCheckpointDir: d.Found.CheckpointDir, CheckpointDir: o.CheckpointDir}
		if !o.New {
			fe.Channel = o.ID.String()
		}
		o.Foreign = append(o.Foreign, fe)
	case d.Found.CheckpointDir != o.CheckpointDir:
		d.Write = true
	}
}
