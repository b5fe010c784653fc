package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/capsem/capsem/guest/proto"
)

// Files over the control channel, for a guest without a transfer disk:
// cat in the guest, the bytes in the command's stdin or stdout.

// channelPutScript writes stdin beside $1 and renames it over, its
// directory made first, then sets mode $2 if given.
const channelPutScript = `set -e
umask 022
mkdir -p -- "$(dirname -- "$1")"
t="$1.capsem-part"
cat > "$t"
if [ -n "$2" ]; then chmod -- "$2" "$t"; fi
mv -f -- "$t" "$1"`

// channelGetScript writes $1's size on stderr's first line, then the file
// on stdout.
const channelGetScript = `[ -f "$1" ] || { echo "$1: no such regular file in the guest" >&2; exit 2; }
[ -r "$1" ] || { echo "$1: not readable" >&2; exit 2; }
stat -L -c %s -- "$1" >&2 && exec cat -- "$1"`

func (sb *Sandbox) putOverChannel(ctx context.Context, path, mode string, r io.Reader) (int64, error) {
	s, err := sb.Exec(ctx, proto.Exec{Argv: []string{"sh", "-c", channelPutScript, "capsem-put", path, mode}, Dir: "/"})
	if err != nil {
		return 0, err
	}
	g := newGuard(ctx, s)
	defer g.close()
	errText := collect(s.Stderr())
	go func() { _, _ = io.Copy(io.Discard, s.Stdout()) }()
	n, cerr := io.CopyBuffer(g.writer(s), r, make([]byte, 256<<10))
	if cerr != nil {
		s.Cancel(cerr) // half a body: the target is untouched
	} else {
		_ = s.CloseStdin()
	}
	g.begin()
	exit, werr := s.Wait()
	g.end()
	switch {
	case cerr != nil:
		return n, fmt.Errorf("the upload broke off after %d bytes (%v); %s is unchanged", n, cerr, path)
	case werr != nil || exit.Code != 0:
		return n, fmt.Errorf("the guest could not write %s (exit %d, %v)%s", path, exit.Code, werr, errText())
	}
	return n, nil
}

func (sb *Sandbox) getOverChannel(ctx context.Context, path string, open func(int64) (io.Writer, error)) (_ int64, err error) {
	s, err := sb.Exec(ctx, proto.Exec{Argv: []string{"sh", "-c", channelGetScript, "capsem-get", path}, Dir: "/"})
	if err != nil {
		return 0, err
	}
	defer endSession(ctx, s, &err)
	g := newGuard(ctx, s)
	defer g.close()
	first := &guardedReader{r: s.Stderr(), g: g} // guarded for the size line only: then drained in the background
	errs := bufio.NewReader(first)
	line, lerr := errs.ReadString('\n')
	size, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if lerr != nil || perr != nil || size < 0 {
		if gone := endedWith(s); gone != nil {
			return 0, fmt.Errorf("the guest did not send %s: %w", path, gone)
		}
		rest, _ := io.ReadAll(io.LimitReader(errs, 64<<10))
		_, _ = io.Copy(io.Discard, g.reader(s.Stdout()))
		return 0, &NotFoundError{Msg: strings.TrimSpace(line + string(rest))}
	}
	first.g = nil
	go func() { _, _ = io.Copy(io.Discard, errs) }()
	w, err := open(size)
	if err != nil {
		return 0, err
	}
	// Exactly size bytes: a file that changed size meanwhile ends short,
	// which the reader sees as an error, never as a different file.
	n, err := io.CopyBuffer(w, io.LimitReader(g.reader(s.Stdout()), size), make([]byte, 256<<10))
	_, _ = io.Copy(io.Discard, g.reader(s.Stdout()))
	if err == nil && n != size {
		err = fmt.Errorf("%s: the guest sent %d of %d bytes", path, n, size)
	}
	return n, err
}
