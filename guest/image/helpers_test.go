package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"testing"
)

// elfNote encodes one ELF note.
func elfNote(owner string, typ uint32, desc []byte) []byte {
	var b bytes.Buffer
	name := append([]byte(owner), 0)
	binary.Write(&b, binary.LittleEndian, [3]uint32{uint32(len(name)), uint32(len(desc)), typ})
	b.Write(name)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.Write(desc)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

// testELF builds a minimal little-endian x86-64 ELF64 file: optionally one
// PT_NOTE segment holding notes, and the named sections (sorted by name).
func testELF(typ elf.Type, notes []byte, sections map[string][]byte) []byte {
	const ehsize, phsize, shsize = 64, 56, 64
	nph := 0
	if notes != nil {
		nph = 1
	}
	names := make([]string, 0, len(sections))
	for n := range sections {
		names = append(names, n)
	}
	sort.Strings(names)

	var data bytes.Buffer
	off := func() uint64 { return uint64(ehsize + nph*phsize + data.Len()) }
	noteOff := off()
	data.Write(notes)
	shstr := []byte{0}
	type sec struct {
		name      uint32
		off, size uint64
	}
	var secs []sec
	for _, n := range names {
		secs = append(secs, sec{uint32(len(shstr)), off(), uint64(len(sections[n]))})
		shstr = append(shstr, append([]byte(n), 0)...)
		data.Write(sections[n])
	}
	shstrName := uint32(len(shstr))
	shstr = append(shstr, []byte(".shstrtab\x00")...)
	shstrOff := off()
	data.Write(shstr)
	for data.Len()%8 != 0 {
		data.WriteByte(0)
	}
	shoff := off()

	var b bytes.Buffer
	h := elf.Header64{
		Type: uint16(typ), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Ehsize: ehsize, Phentsize: phsize, Phnum: uint16(nph), Shentsize: shsize,
		Shnum: uint16(len(secs) + 2), Shstrndx: uint16(len(secs) + 1), Shoff: shoff,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	if nph > 0 {
		h.Phoff = ehsize
	}
	binary.Write(&b, binary.LittleEndian, h)
	if nph > 0 {
		binary.Write(&b, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_NOTE), Off: noteOff, Filesz: uint64(len(notes)), Memsz: uint64(len(notes)), Align: 4})
	}
	b.Write(data.Bytes())
	binary.Write(&b, binary.LittleEndian, elf.Section64{})
	for _, s := range secs {
		binary.Write(&b, binary.LittleEndian, elf.Section64{Name: s.name, Type: uint32(elf.SHT_PROGBITS), Off: s.off, Size: s.size, Addralign: 1})
	}
	binary.Write(&b, binary.LittleEndian, elf.Section64{Name: shstrName, Type: uint32(elf.SHT_STRTAB), Off: shstrOff, Size: uint64(len(shstr)), Addralign: 1})
	return b.Bytes()
}

// testVmlinux is a fake kernel ELF with a PVH entry note.
func testVmlinux(entry uint32) []byte {
	desc := binary.LittleEndian.AppendUint32(nil, entry)
	notes := append(elfNote("Xen", 6, []byte("linux\x00")), elfNote("Xen", xenElfnotePhys32Entry, desc)...)
	return testELF(elf.ET_EXEC, notes, nil)
}

// testBzImage wraps a compressed payload in a minimal bzImage: setup
// sectors, the setup header fields ExtractVmlinux reads, the payload.
func testBzImage(payload []byte) []byte {
	const setupSects = 4
	b := make([]byte, (setupSects+1)*512)
	b[0x1f1] = setupSects
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x206:], 0x20f)
	const payloadOffset = 0x40
	binary.LittleEndian.PutUint32(b[0x248:], payloadOffset)
	binary.LittleEndian.PutUint32(b[0x24c:], uint32(len(payload)))
	b = append(b, make([]byte, payloadOffset)...)
	return append(b, payload...)
}

// testModule is a fake kernel module: an ET_REL ELF whose .modinfo says
// name, depends and any extra key=value strings.
func testModule(name string, depends []string, extra ...string) []byte {
	var mi bytes.Buffer
	fmt.Fprintf(&mi, "license=GPL\x00name=%s\x00", name)
	for _, e := range extra {
		mi.WriteString(e + "\x00")
	}
	mi.WriteString("depends=")
	for i, d := range depends {
		if i > 0 {
			mi.WriteByte(',')
		}
		mi.WriteString(d)
	}
	mi.WriteString("\x00vermagic=6.1.0 SMP mod_unload\x00")
	return testELF(elf.ET_REL, nil, map[string][]byte{".modinfo": mi.Bytes(), ".text": {0xc3}})
}

type tarFile struct {
	name string
	data []byte
}

func testTar(t *testing.T, files []tarFile) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipBytes(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close() // writing to a bytes.Buffer cannot fail
	return out.Bytes()
}

// testDeb assembles a .deb: an ar archive of debian-binary, control.tar.gz
// and the given data member.
func testDeb(t *testing.T, dataName string, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	member := func(name string, body []byte) {
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", name, 0, 0, 0, "100644", len(body))
		b.Write(body)
		if len(body)%2 == 1 {
			b.WriteByte('\n')
		}
	}
	member("debian-binary", []byte("2.0\n"))
	member("control.tar.gz", gzipBytes(testTar(t, []tarFile{{"./control", []byte("Package: x\n")}})))
	member(dataName, data)
	return b.Bytes()
}
