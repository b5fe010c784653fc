package fdctl

import (
	"errors"
	"os"
	"testing"
)

func TestControlGivesTheDescriptorAndFnsError(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	want := errors.New("from fn")
	var got int = -1
	if err := Control(r, func(fd int) error { got = fd; return want }); !errors.Is(err, want) {
		t.Fatalf("Control: %v, want fn's error", err)
	}
	if got < 0 {
		t.Fatalf("fn got descriptor %d", got)
	}
	r.Close()
	if err := Control(r, func(int) error { return nil }); err == nil {
		t.Fatal("Control on a closed file: no error")
	}
}
