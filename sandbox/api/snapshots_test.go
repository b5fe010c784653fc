package api

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"testing"

	"github.com/capsem/capsem/guest/proto"
)

func TestSnapshotStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
		why  string
	}{
		{fmt.Errorf("snapshot x: %w", fs.ErrNotExist), http.StatusNotFound, "no such snapshot"},
		{fmt.Errorf("%w: sandbox a has a snapshot", ErrSnapshotExists), http.StatusConflict, "the tag is taken"},
		{ErrStopping, http.StatusConflict, "the sandbox stops"},
		{fmt.Errorf("freeze: %w", proto.ErrBusy), http.StatusConflict, "the workspace is in use"},
		{fmt.Errorf("%w %q: want a-z", ErrBadTag, "A B"), http.StatusBadRequest, "the caller's tag"},
		{errors.New("write ram: file exists"), http.StatusInternalServerError, "an EEXIST of the host's is not the caller's conflict"},
		{errors.New("disk full"), http.StatusInternalServerError, "anything else is the server's"},
	} {
		if got := snapshotStatus(c.err); got != c.want {
			t.Errorf("%v: %d, want %d (%s)", c.err, got, c.want, c.why)
		}
	}
}
