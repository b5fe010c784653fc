package store

// FS events: field numbers 320–383. They are on disk in every store (see
// the format in codec.go): never change or reuse one; a new field takes
// the next number and becomes fsKnown.
const (
	fFSAction    = 320
	fFSPath      = 321
	fFSOldPath   = 322
	fFSSize      = 323
	fFSDir       = 324 // bool
	fFSGuestTime = 325 // Unix nanoseconds, present unless the zero time
)

// The FS block (lo inclusive, hi exclusive) and the highest number this
// build knows in it.
const fsLo, fsHi, fsKnown = 320, 384, fFSGuestTime

var fsActions = []string{FSCreated, FSModified, FSDeleted, FSRenamed, FSOverflow}

func (fs *FS) appendTo(b []byte) []byte {
	b = appendString(b, fFSAction, fs.Action)
	b = appendString(b, fFSPath, fs.Path)
	b = appendString(b, fFSOldPath, fs.OldPath)
	b = appendInt(b, fFSSize, fs.Size)
	b = appendBool(b, fFSDir, fs.Dir)
	b = appendTime(b, fFSGuestTime, fs.GuestTime)
	return b
}

func (fs *FS) setField(f field) error {
	switch f.num {
	case fFSAction:
		return setIntern(&f, &fs.Action, fsActions)
	case fFSPath:
		return setString(&f, &fs.Path)
	case fFSOldPath:
		return setString(&f, &fs.OldPath)
	case fFSSize:
		return setInt(&f, &fs.Size)
	case fFSDir:
		return setBool(&f, &fs.Dir)
	case fFSGuestTime:
		return setTime(&f, &fs.GuestTime)
	}
	return nil
}
