package api

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// The clients state the buffered exec's cut as their own constant (they
// have no Go to import): it must be maxBufferedOutput.
func TestClientCapsAreMaxBufferedOutput(t *testing.T) {
	for _, c := range []struct{ file, re, why string }{
		{"../../sdk/python/capsem/_protocol.py", `(?m)^MAX_BUFFERED = (\d+) << (\d+)$`, "what both Python clients share"},
		{"../../sdk/typescript/src/sandbox.ts", `(?m)^export const MAX_BUFFERED = (\d+) << (\d+);$`, "the TypeScript client's"},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(c.re).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s (%s): no MAX_BUFFERED = N << S", c.file, c.why)
		}
		n, _ := strconv.Atoi(string(m[1]))
		s, _ := strconv.Atoi(string(m[2]))
		if n<<s != maxBufferedOutput {
			t.Errorf("%s: MAX_BUFFERED is %d, sandbox/api's maxBufferedOutput %d", c.file, n<<s, maxBufferedOutput)
		}
	}
}
