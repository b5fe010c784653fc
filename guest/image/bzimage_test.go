package image

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

func sizeAppend(comp []byte, n int) []byte {
	return binary.LittleEndian.AppendUint32(comp, uint32(n))
}

func TestExtractVmlinuxCompressions(t *testing.T) {
	elfb := testVmlinux(0x1000850)
	xzp := func() []byte {
		var b bytes.Buffer
		w, _ := xz.NewWriter(&b)
		w.Write(elfb)
		w.Close()
		return sizeAppend(b.Bytes(), len(elfb))
	}
	gzp := func() []byte { return gzipBytes(elfb) }
	zsp := func() []byte {
		e, _ := zstd.NewWriter(nil)
		return sizeAppend(e.EncodeAll(elfb, nil), len(elfb))
	}
	lz4p := func() []byte {
		var b bytes.Buffer
		w := lz4.NewWriter(&b)
		if err := w.Apply(lz4.LegacyOption(true)); err != nil {
			t.Fatal(err)
		}
		w.Write(elfb)
		w.Close()
		return sizeAppend(b.Bytes(), len(elfb))
	}
	for kind, payload := range map[string]func() []byte{
		CompressionXZ: xzp, CompressionGzip: gzp, CompressionZstd: zsp, CompressionLZ4: lz4p,
	} {
		v, err := ExtractVmlinux(testBzImage(payload()))
		if err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		if v.Compression != kind || v.PVHEntry != 0x1000850 || !bytes.Equal(v.ELF, elfb) {
			t.Errorf("%s: got %s entry %#x, %d bytes", kind, v.Compression, v.PVHEntry, len(v.ELF))
		}
	}
}

func TestExtractVmlinuxErrors(t *testing.T) {
	elfb := testVmlinux(1)
	gz := gzipBytes(elfb)
	noPVH := testELF(2, elfNote("Xen", 6, []byte("linux\x00")), nil)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte("not an elf at all"))
	zw.Close()
	wrongSize := func() []byte {
		e, _ := zstd.NewWriter(nil)
		return sizeAppend(e.EncodeAll(elfb, nil), len(elfb)+1)
	}()
	for name, tc := range map[string]struct {
		bz   []byte
		want string
	}{
		"empty":        {nil, "no setup header"},
		"not bzImage":  {make([]byte, 4096), "no setup header"},
		"no PVH note":  {testBzImage(gzipBytes(noPVH)), "no PVH entry note"},
		"not ELF":      {testBzImage(zb.Bytes()), "not an ELF"},
		"LZO":          {testBzImage(sizeAppend([]byte{0x89, 'L', 'Z', 'O', 0, 0, 0, 0}, 8)), "LZO"},
		"unknown":      {testBzImage([]byte("garbage payload")), "unknown payload compression"},
		"wrong size":   {testBzImage(wrongSize), "trailer says"},
		"payload past": {func() []byte { b := testBzImage(gz); return b[:len(b)-10] }(), "outside"},
	} {
		_, err := ExtractVmlinux(tc.bz)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

func FuzzExtractVmlinux(f *testing.F) {
	f.Add(testBzImage(gzipBytes(testVmlinux(1))))
	f.Fuzz(func(t *testing.T, b []byte) {
		ExtractVmlinux(b)
	})
}
