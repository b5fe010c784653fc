package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// maxDebData bounds a .deb's unpacked data.tar (linux-image-*-amd64 is
// about 410 MB).
const maxDebData = 4 << 30

// maxDebMember bounds a compressed .deb member held in memory.
const maxDebMember = 1 << 30

// walkDeb calls fn for every entry of a .deb's data.tar, in archive order,
// in pure Go: the ar container, then data.tar.xz (decoded block-parallel,
// see xzStream), .zst, .gz or plain. fn must consume r before returning.
// Entry names keep their "./" prefix stripped ("boot/vmlinuz-…").
func walkDeb(path string, fn func(h *tar.Header, r io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	magic := make([]byte, 8)
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != "!<arch>\n" {
		return fmt.Errorf("%s: not a .deb (no ar header)", path)
	}
	for {
		name, size, err := nextArMember(br)
		if err == io.EOF {
			return fmt.Errorf("%s: no data.tar member", path)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !strings.HasPrefix(name, "data.tar") {
			if _, err := br.Discard(int(size + size%2)); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			continue
		}
		data, err := openDataTar(name, io.LimitReader(br, size), size)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, name, err)
		}
		defer data.Close()
		tr := tar.NewReader(io.LimitReader(data, maxDebData))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %s: %w", path, name, err)
			}
			h.Name = strings.TrimPrefix(h.Name, "./")
			if err := fn(h, tr); err != nil {
				return err
			}
		}
	}
}

// nextArMember reads a (common or GNU) ar member header.
func nextArMember(r *bufio.Reader) (name string, size int64, err error) {
	var hdr [60]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = errors.New("truncated ar header")
		}
		return "", 0, err
	}
	if hdr[58] != '`' || hdr[59] != '\n' {
		return "", 0, errors.New("bad ar member header")
	}
	name = strings.TrimSuffix(strings.TrimSpace(string(hdr[0:16])), "/")
	size, err = strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
	if err != nil || size < 0 {
		return "", 0, fmt.Errorf("ar member %q: bad size", name)
	}
	return name, size, nil
}

func openDataTar(name string, r io.Reader, size int64) (io.ReadCloser, error) {
	switch name {
	case "data.tar":
		return io.NopCloser(r), nil
	case "data.tar.gz":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		return zr, nil
	case "data.tar.zst":
		d, err := zstd.NewReader(r)
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	case "data.tar.xz":
		if size > maxDebMember {
			return nil, fmt.Errorf("%d bytes, more than the %d this reader holds in memory", size, maxDebMember)
		}
		src := make([]byte, size)
		if _, err := io.ReadFull(r, src); err != nil {
			return nil, err
		}
		return newXZReader(src, maxDebData, runtime.GOMAXPROCS(0))
	}
	return nil, errors.New("unsupported data member compression (want .xz, .zst, .gz or none)")
}

// readAllLimited reads r, failing past max bytes.
func readAllLimited(r io.Reader, max int64) ([]byte, error) {
	var b bytes.Buffer
	n, err := io.Copy(&b, io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if n > max {
		return nil, fmt.Errorf("more than %d bytes", max)
	}
	return b.Bytes(), nil
}
