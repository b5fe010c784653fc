package image

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxVmlinux bounds a decompressed kernel (Debian's 6.1 vmlinux is 66 MB).
const maxVmlinux = 512 << 20

// Payload compressions ExtractVmlinux understands, by name.
const (
	CompressionXZ    = "xz"
	CompressionGzip  = "gzip"
	CompressionZstd  = "zstd"
	CompressionLZ4   = "lz4"
	CompressionBzip2 = "bzip2"
)

// xenElfnotePhys32Entry is XEN_ELFNOTE_PHYS32_ENTRY: the 32-bit physical
// entry point that PVH boot (QEMU -kernel with an ELF, Firecracker, vz's
// linux boot loader does not need it) jumps to.
const xenElfnotePhys32Entry = 18

// Vmlinux is a kernel taken out of its bzImage.
type Vmlinux struct {
	ELF         []byte
	Compression string // the bzImage payload's compression
	PVHEntry    uint32 // XEN_ELFNOTE_PHYS32_ENTRY
}

// ExtractVmlinux takes the ELF vmlinux out of an x86 bzImage: the setup
// header says where the compressed payload is, its magic says how it is
// compressed (xz with the x86 BCJ filter, gzip, zstd, lz4 legacy, bzip2),
// and the result must be an x86-64 ELF executable with a PVH entry note.
func ExtractVmlinux(bz []byte) (*Vmlinux, error) {
	if len(bz) < 0x270 || !bytes.Equal(bz[0x202:0x206], []byte("HdrS")) {
		return nil, errors.New("bzImage: no setup header (not an x86 bzImage)")
	}
	if v := binary.LittleEndian.Uint16(bz[0x206:]); v < 0x208 {
		return nil, fmt.Errorf("bzImage: boot protocol %#x has no payload fields (want 2.08+)", v)
	}
	setupSects := int(bz[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	off := int64(setupSects+1)*512 + int64(binary.LittleEndian.Uint32(bz[0x248:]))
	n := int64(binary.LittleEndian.Uint32(bz[0x24c:]))
	if off+n > int64(len(bz)) || n < 8 {
		return nil, fmt.Errorf("bzImage: payload [%d, +%d) outside the %d-byte file", off, n, len(bz))
	}
	payload := bz[off : off+n]
	// Every compressor but gzip gets the decompressed size appended
	// (scripts/Makefile.lib size_append); gzip's own trailer holds it.
	trailer := int64(binary.LittleEndian.Uint32(payload[len(payload)-4:]))
	body := payload[:len(payload)-4]

	var (
		out  []byte
		kind string
		err  error
	)
	switch {
	case bytes.HasPrefix(payload, xzMagic):
		kind = CompressionXZ
		out, err = decodeXZ(body, maxVmlinux)
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		kind = CompressionGzip
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(payload)); err == nil {
			zr.Multistream(false)
			out, err = readLimited(zr)
		}
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		kind = CompressionZstd
		var d *zstd.Decoder
		if d, err = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxVmlinux), zstd.WithDecoderMaxWindow(1<<30)); err == nil {
			out, err = d.DecodeAll(body, nil)
			d.Close()
		}
	case bytes.HasPrefix(payload, []byte{0x02, 0x21, 0x4c, 0x18}):
		kind = CompressionLZ4
		out, err = readLimited(lz4.NewReader(bytes.NewReader(payload)))
	case bytes.HasPrefix(payload, []byte("BZh")):
		kind = CompressionBzip2
		out, err = readLimited(bzip2.NewReader(bytes.NewReader(body)))
	case bytes.HasPrefix(payload, []byte{0x5d, 0, 0}):
		return nil, errors.New("bzImage: LZMA-compressed payload is not supported (xz, gzip, zstd, lz4, bzip2 are)")
	case bytes.HasPrefix(payload, []byte{0x89, 'L', 'Z', 'O'}):
		return nil, errors.New("bzImage: LZO-compressed payload is not supported (xz, gzip, zstd, lz4, bzip2 are)")
	default:
		return nil, fmt.Errorf("bzImage: unknown payload compression (magic % x)", payload[:4])
	}
	if err != nil {
		return nil, fmt.Errorf("bzImage: %s payload: %w", kind, err)
	}
	if kind != CompressionGzip && int64(len(out)) != trailer {
		return nil, fmt.Errorf("bzImage: %s payload gave %d bytes, its trailer says %d", kind, len(out), trailer)
	}
	entry, err := pvhEntry(out)
	if err != nil {
		return nil, err
	}
	return &Vmlinux{ELF: out, Compression: kind, PVHEntry: entry}, nil
}

func readLimited(r io.Reader) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, maxVmlinux+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxVmlinux {
		return nil, fmt.Errorf("more than %d bytes", maxVmlinux)
	}
	return out, nil
}

// pvhEntry checks that b is an x86-64 ELF executable and returns its PVH
// entry point (the "Xen" note of type XEN_ELFNOTE_PHYS32_ENTRY).
func pvhEntry(b []byte) (uint32, error) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("vmlinux: not an ELF file: %w", err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
		return 0, fmt.Errorf("vmlinux: %v %v %v, want a 64-bit x86-64 executable", f.Class, f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(io.LimitReader(p.Open(), 1<<20))
		if err != nil {
			return 0, fmt.Errorf("vmlinux: notes: %w", err)
		}
		if e, ok := findNote(notes, f.ByteOrder, "Xen", xenElfnotePhys32Entry); ok {
			if len(e) < 4 {
				return 0, errors.New("vmlinux: PVH entry note too short")
			}
			return f.ByteOrder.Uint32(e), nil
		}
	}
	return 0, errors.New("vmlinux: no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY): the kernel was built without CONFIG_PVH and cannot boot on microvm with -kernel")
}

// findNote walks ELF notes (namesz, descsz, type, name, desc; 4-byte
// aligned) for one with the given owner and type.
func findNote(b []byte, bo binary.ByteOrder, owner string, typ uint32) ([]byte, bool) {
	align := func(n uint32) uint32 { return (n + 3) &^ 3 }
	for len(b) >= 12 {
		namesz, descsz, t := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
		b = b[12:]
		if uint64(align(namesz))+uint64(align(descsz)) > uint64(len(b)) {
			return nil, false
		}
		name := string(bytes.TrimRight(b[:namesz], "\x00"))
		desc := b[align(namesz) : align(namesz)+descsz]
		if name == owner && t == typ {
			return desc, true
		}
		b = b[align(namesz)+align(descsz):]
	}
	return nil, false
}
