//go:build unix

package hypervisor

// A RAM image is a guest's RAM file stored compressed, block by block, so
// that a snapshot's memory takes the room its contents need rather than
// every page the guest touched: a booted guest's ~125 MiB of kernel, slab
// and page tables store in ~35 MiB.
//
//	+-------------------------------------------------------------+
//	| header, 32 bytes                                            |
//	|   magic "capsem-ram-lz4-1" (16) · block size u32 · blocks   |
//	|   u32 · RAM size u64                  (little endian)       |
//	+-------------------------------------------------------------+
//	| index: blocks × 16 bytes                                    |
//	|   offset u64 · stored length u32 · kind u32                 |
//	|   kind 0: zeros, nothing stored; 1: stored as is;           |
//	|   2: an LZ4 block (github.com/pierrec/lz4/v4 CompressBlock) |
//	+-------------------------------------------------------------+
//	| the stored blocks, in no particular order (the index says)  |
//	+-------------------------------------------------------------+
//
// Block i is the RAM's bytes [i×block size, min((i+1)×block size, RAM
// size)). The format is capsem's own, for snapshots this capsem restores:
// it is not stable across releases (a restore checks the capsem version
// before reading it) and is never read from a guest.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"
)

const (
	ramImageMagic  = "capsem-ram-lz4-1"
	ramImageHeader = 32
	ramImageEntry  = 16

	blockZero = 0
	blockRaw  = 1
	blockLZ4  = 2
)

// ramImageWorkers compress or expand blocks at once. Measured on a booted
// guest's RAM (135 MiB in use) on one core: LZ4 compresses at ~330 MB/s
// (3.8×) and expands at ~2.1 GB/s, and gives up on incompressible blocks
// (random bytes) at ~4.4 GB/s; s2 was as good on RAM but 20× slower on
// random bytes, zstd's fastest level 1.6× smaller but expands at 0.7 GB/s,
// which a resume waits for. A booted guest's 130 MiB of RAM saves in
// ~155 ms to 38 MiB and loads into tmpfs in 80-90 ms, where a sparse copy
// of the raw file takes 40-60 ms.
func ramImageWorkers() int { return max(1, min(runtime.NumCPU(), 4)) }

type ramBlock struct {
	off  uint64
	n    uint32
	kind uint32
}

// SaveRAMImage writes the RAM file src as a RAM image dst (mode perm,
// replaced if it exists): holes and blocks of zeros take no room, the
// rest is LZ4-compressed where that makes it smaller. It returns the
// image's size.
func SaveRAMImage(dst, src string, perm os.FileMode) (int64, error) {
	return fillNew(dst, src, perm, "compress", saveRAMImage)
}

// firstError keeps the first error the workers of a save or load meet.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func saveRAMImage(out, in *os.File, size int64) (int64, error) {
	nblocks := (size + copyBlock - 1) / copyBlock
	if nblocks > 1<<31 {
		return 0, fmt.Errorf("%d bytes of RAM: too large", size)
	}
	index := make([]ramBlock, nblocks)
	data, err := dataBlocks(in, size)
	if err != nil {
		return 0, err
	}
	start := int64(ramImageHeader + ramImageEntry*len(index))
	var (
		next  atomic.Int64 // the next data block's place in data
		end   atomic.Int64 // where the next stored block goes
		wg    sync.WaitGroup
		first firstError
	)
	end.Store(start)
	fail := first.set
	for range ramImageWorkers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c lz4.Compressor
			buf := make([]byte, copyBlock)
			zbuf := make([]byte, lz4.CompressBlockBound(copyBlock))
			for {
				k := next.Add(1) - 1
				if k >= int64(len(data)) {
					return
				}
				i := data[k]
				off := i * copyBlock
				b := buf[:min(copyBlock, size-off)]
				if _, err := in.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
					fail(err)
					return
				}
				if allZero(b) {
					continue // blockZero, as index has it
				}
				stored, kind := b, uint32(blockRaw)
				if z, err := c.CompressBlock(b, zbuf); err == nil && z > 0 && z < len(b) {
					stored, kind = zbuf[:z], blockLZ4
				}
				at := end.Add(int64(len(stored))) - int64(len(stored))
				if _, err := out.WriteAt(stored, at); err != nil {
					fail(err)
					return
				}
				index[i] = ramBlock{off: uint64(at), n: uint32(len(stored)), kind: kind}
			}
		}()
	}
	wg.Wait()
	if first.err != nil {
		return 0, first.err
	}
	head := make([]byte, start)
	copy(head, ramImageMagic)
	binary.LittleEndian.PutUint32(head[16:], copyBlock)
	binary.LittleEndian.PutUint32(head[20:], uint32(len(index)))
	binary.LittleEndian.PutUint64(head[24:], uint64(size))
	for i, e := range index {
		p := head[ramImageHeader+ramImageEntry*i:]
		binary.LittleEndian.PutUint64(p, e.off)
		binary.LittleEndian.PutUint32(p[8:], e.n)
		binary.LittleEndian.PutUint32(p[12:], e.kind)
	}
	if _, err := out.WriteAt(head, 0); err != nil {
		return 0, err
	}
	return end.Load(), nil
}

// dataBlocks lists the blocks of in that hold data (SEEK_DATA and
// SEEK_HOLE: a tmpfs RAM file's untouched pages are holes).
func dataBlocks(in *os.File, size int64) ([]int64, error) {
	var blocks []int64
	fd := int(in.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("seek data: %w", err)
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("seek hole: %w", err)
		}
		for b := data / copyBlock; b*copyBlock < hole; b++ {
			if len(blocks) == 0 || blocks[len(blocks)-1] < b {
				blocks = append(blocks, b)
			}
		}
		off = hole
	}
	return blocks, nil
}

// LoadRAMImage expands the RAM image src into out (an open, writable
// file, whose length becomes the RAM's), leaving zero blocks as holes; out
// stays open. It returns the bytes written. An image that is not whole or
// not one is an error, and out then holds no guest.
func LoadRAMImage(out *os.File, src string) (int64, error) {
	return fillInto(out, src, "expand", loadRAMImage)
}

func loadRAMImage(out, in *os.File, fileSize int64) (int64, error) {
	head := make([]byte, ramImageHeader)
	if _, err := in.ReadAt(head, 0); err != nil {
		return 0, fmt.Errorf("not a RAM image: %w", err)
	}
	if string(head[:16]) != ramImageMagic {
		return 0, errors.New("not a RAM image (its magic)")
	}
	bsize := int64(binary.LittleEndian.Uint32(head[16:]))
	nblocks := int64(binary.LittleEndian.Uint32(head[20:]))
	size := int64(binary.LittleEndian.Uint64(head[24:]))
	if bsize == 0 || bsize > 64<<20 || size < 0 || (size+bsize-1)/bsize != nblocks {
		return 0, fmt.Errorf("a RAM image of %d bytes in %d blocks of %d: inconsistent", size, nblocks, bsize)
	}
	start := ramImageHeader + ramImageEntry*nblocks
	if start > fileSize {
		return 0, errors.New("a RAM image cut short in its index")
	}
	raw := make([]byte, ramImageEntry*nblocks)
	if _, err := in.ReadAt(raw, ramImageHeader); err != nil {
		return 0, err
	}
	index := make([]ramBlock, nblocks)
	for i := range index {
		p := raw[ramImageEntry*i:]
		e := ramBlock{off: binary.LittleEndian.Uint64(p), n: binary.LittleEndian.Uint32(p[8:]), kind: binary.LittleEndian.Uint32(p[12:])}
		want := min(bsize, size-int64(i)*bsize)
		ok := false
		switch e.kind {
		case blockZero:
			ok = e.n == 0
		case blockRaw:
			ok = int64(e.n) == want
		case blockLZ4:
			ok = e.n > 0 && int64(e.n) < want
		}
		if !ok || (e.kind != blockZero && (e.off < uint64(start) || e.off+uint64(e.n) > uint64(fileSize))) {
			return 0, fmt.Errorf("block %d of the RAM image is damaged (kind %d, %d bytes at %d)", i, e.kind, e.n, e.off)
		}
		index[i] = e
	}
	// Emptied first: a zero block is not written, whatever out held.
	if err := out.Truncate(0); err != nil {
		return 0, err
	}
	if err := out.Truncate(size); err != nil {
		return 0, err
	}
	var (
		next, written atomic.Int64
		wg            sync.WaitGroup
		first         firstError
	)
	fail := first.set
	for range ramImageWorkers() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// pwrite, not a mapping of out: faulting in a tmpfs mapping
			// page by page made the load of a booted guest's 130 MiB
			// 350 ms, against 80-90 ms so.
			zbuf := make([]byte, bsize)
			buf := make([]byte, bsize)
			for {
				i := next.Add(1) - 1
				if i >= nblocks {
					return
				}
				e := index[i]
				want := min(bsize, size-i*bsize)
				if e.kind == blockZero {
					continue
				}
				if _, err := in.ReadAt(zbuf[:e.n], int64(e.off)); err != nil {
					fail(err)
					return
				}
				b := zbuf[:e.n]
				if e.kind == blockLZ4 {
					n, err := lz4.UncompressBlock(zbuf[:e.n], buf[:want])
					if err != nil || int64(n) != want {
						fail(fmt.Errorf("block %d of the RAM image does not expand to %d bytes (%d, %v)", i, want, n, err))
						return
					}
					b = buf[:want]
				}
				if _, err := out.WriteAt(b, i*bsize); err != nil {
					fail(err)
					return
				}
				written.Add(want)
			}
		}()
	}
	wg.Wait()
	return written.Load(), first.err
}
