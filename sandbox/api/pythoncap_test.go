package api

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The Python client states the buffered exec's cut as its own constant
// (it has no Go to import): it must be maxBufferedOutput.
func TestPythonClientCapIsMaxBufferedOutput(t *testing.T) {
	const file = "../../sdk/python/capsem/_protocol.py" // what both Python clients share
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MAX_BUFFERED = (\d+) << (\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no MAX_BUFFERED = N << S", file)
	}
	n, _ := strconv.Atoi(string(m[1]))
	s, _ := strconv.Atoi(string(m[2]))
	if n<<s != maxBufferedOutput {
		t.Errorf("%s: MAX_BUFFERED is %d, sandbox/api's maxBufferedOutput %d", file, n<<s, maxBufferedOutput)
	}
}
