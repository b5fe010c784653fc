package image

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Initramfs builds a newc ("070701") cpio archive, the format the kernel
// unpacks into its rootfs. The output is a function of the entries only:
// they are written sorted by path, parents before children, with mtime 0,
// uid/gid 0, inode numbers counted from 1, and no device numbers but those
// of device nodes. Same entries, same bytes.
type Initramfs struct {
	entries map[string]*cpioEntry
}

type cpioEntry struct {
	mode         uint32 // type bits | permissions, as in stat's st_mode
	data         []byte // file contents or symlink target
	src          string // file contents from this host path when data is nil
	size         int64
	rmajor, rmin uint32
}

const (
	sIFMT  = 0o170000
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	sIFCHR = 0o020000
)

// NewInitramfs returns an empty archive (it always holds "/").
func NewInitramfs() *Initramfs {
	return &Initramfs{entries: map[string]*cpioEntry{}}
}

func cleanPath(p string) (string, error) {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" || c == "." {
		return "", fmt.Errorf("initramfs: %q is not a path below /", p)
	}
	return c, nil
}

func (r *Initramfs) add(p string, e *cpioEntry) error {
	c, err := cleanPath(p)
	if err != nil {
		return err
	}
	if old, ok := r.entries[c]; ok {
		if old.mode&sIFMT == sIFDIR && e.mode&sIFMT == sIFDIR {
			old.mode = e.mode
			return nil
		}
		return fmt.Errorf("initramfs: %s added twice", c)
	}
	// Parents are implicit directories.
	for d := path.Dir(c); d != "."; d = path.Dir(d) {
		old, ok := r.entries[d]
		if !ok {
			r.entries[d] = &cpioEntry{mode: sIFDIR | 0o755}
			continue
		}
		if old.mode&sIFMT != sIFDIR {
			return fmt.Errorf("initramfs: %s: parent %s is not a directory", c, d)
		}
	}
	r.entries[c] = e
	return nil
}

// AddDir adds a directory.
func (r *Initramfs) AddDir(p string, perm fs.FileMode) error {
	return r.add(p, &cpioEntry{mode: sIFDIR | unixPerm(perm)})
}

// AddFile adds a regular file with the given contents.
func (r *Initramfs) AddFile(p string, perm fs.FileMode, data []byte) error {
	if data == nil {
		data = []byte{}
	}
	return r.add(p, &cpioEntry{mode: sIFREG | unixPerm(perm), data: data, size: int64(len(data))})
}

// AddFileFrom adds a regular file whose contents are read from the host
// file src when the archive is written (its size must not change until
// then). The host file's mode and times are not used.
func (r *Initramfs) AddFileFrom(p string, perm fs.FileMode, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("initramfs: %s is not a regular file", src)
	}
	return r.add(p, &cpioEntry{mode: sIFREG | unixPerm(perm), src: src, size: st.Size()})
}

// AddSymlink adds a symbolic link to target.
func (r *Initramfs) AddSymlink(p, target string) error {
	return r.add(p, &cpioEntry{mode: sIFLNK | 0o777, data: []byte(target), size: int64(len(target))})
}

// AddCharDev adds a character device node (e.g. /dev/console, 5:1, so the
// kernel can give /init its stdio before devtmpfs is mounted).
func (r *Initramfs) AddCharDev(p string, perm fs.FileMode, major, minor uint32) error {
	return r.add(p, &cpioEntry{mode: sIFCHR | unixPerm(perm), rmajor: major, rmin: minor})
}

// Paths lists the archive's entries in write order.
func (r *Initramfs) Paths() []string {
	ps := make([]string, 0, len(r.entries))
	for p := range r.entries {
		ps = append(ps, p)
	}
	// Sorting by path puts a directory before its contents.
	sort.Strings(ps)
	return ps
}

// WriteTo writes the uncompressed archive.
func (r *Initramfs) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: bufio.NewWriterSize(w, 1<<20)}
	ino := uint32(1)
	hdr := func(name string, e *cpioEntry, size int64) error {
		nlink := 1
		if e.mode&sIFMT == sIFDIR {
			nlink = 2
		}
		if size > 0xffffffff {
			return fmt.Errorf("initramfs: %s is larger than newc's 4 GiB limit", name)
		}
		_, err := fmt.Fprintf(cw, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, e.mode, 0, 0, nlink, 0, size, 0, 0, e.rmajor, e.rmin, len(name)+1, 0)
		if err != nil {
			return err
		}
		ino++
		if _, err := io.WriteString(cw, name+"\x00"); err != nil {
			return err
		}
		return cw.pad()
	}
	root := &cpioEntry{mode: sIFDIR | 0o755}
	if err := hdr(".", root, 0); err != nil {
		return cw.n, err
	}
	for _, p := range r.Paths() {
		e := r.entries[p]
		if err := hdr(p, e, e.size); err != nil {
			return cw.n, err
		}
		switch {
		case e.src != "":
			if err := copyExact(cw, e.src, e.size); err != nil {
				return cw.n, err
			}
		case len(e.data) > 0:
			if _, err := cw.Write(e.data); err != nil {
				return cw.n, err
			}
		}
		if err := cw.pad(); err != nil {
			return cw.n, err
		}
	}
	trailer := &cpioEntry{}
	if err := hdr("TRAILER!!!", trailer, 0); err != nil {
		return cw.n, err
	}
	err := cw.w.(*bufio.Writer).Flush()
	return cw.n, err
}

func copyExact(w io.Writer, src string, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err != nil {
		return fmt.Errorf("initramfs: %s: %w", src, err)
	}
	if n != size {
		return fmt.Errorf("initramfs: %s shrank while being archived (%d of %d bytes)", src, n, size)
	}
	return nil
}

// Compression of an initramfs.
type Compression string

const (
	// None: the kernel unpacks it without decompressing; the fastest boot
	// under TCG, where the guest's gunzip is emulated.
	None Compression = "none"
	// Gzip: every kernel can unpack it; a quarter of the size.
	Gzip Compression = "gzip"
)

// Write writes the archive compressed with c (gzip output carries no name
// and no time, so it is as reproducible as the archive).
func (r *Initramfs) Write(w io.Writer, c Compression) error {
	switch c {
	case None, "":
		_, err := r.WriteTo(w)
		return err
	case Gzip:
		zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
		if err != nil {
			return err
		}
		if _, err := r.WriteTo(zw); err != nil {
			return err
		}
		return zw.Close()
	}
	return fmt.Errorf("initramfs: compression %q: want none or gzip", c)
}

// WriteFile writes the archive to path atomically (a temporary file in the
// same directory, then a rename).
func (r *Initramfs) WriteFile(p string, c Compression) error {
	f, err := os.CreateTemp(path.Dir(p), ".initramfs-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = r.Write(f, c)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("initramfs: write %s: %w", p, err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// pad writes zeros up to the next 4-byte boundary.
func (c *countWriter) pad() error {
	if r := c.n % 4; r != 0 {
		_, err := c.Write(make([]byte, 4-r))
		return err
	}
	return nil
}

// unixPerm is the st_mode permission bits of m: rwx plus setuid, setgid
// and sticky.
func unixPerm(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}
