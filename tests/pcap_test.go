package tests

import (
	"os"
	"testing"

	"github.com/google/gopacket/pcapgo"
)

// openPCAP opens the capture capsem-net wrote with --pcap; it is closed
// when the test ends.
func openPCAP(t *testing.T, path string) *pcapgo.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
