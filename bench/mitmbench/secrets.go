package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// tokens are the credentials of the mitm-secrets path and the stand-in the
// other paths send in their place.
type tokens struct {
	placeholder string // BENCH_TOKEN's placeholder: what the mitm-secrets guest sends
	real        string // BENCH_TOKEN's real value: what the upstream must receive from it
	plain       string // what the other paths send, as long as the placeholder, so that every path's requests are the same size
	realFile    string // from_file of BENCH_TOKEN
	otherFile   string // from_file of OTHER_TOKEN, bound to another host
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// writeTokens makes new tokens for this run and writes the real values'
// files into dir.
func writeTokens(dir string) (tokens, error) {
	t := tokens{
		placeholder: "capsem-secret-" + randomHex(32),
		real:        "bench-real-" + randomHex(36),
		plain:       "bench-plain-" + randomHex(34),
		realFile:    filepath.Join(dir, "bench-token"),
		otherFile:   filepath.Join(dir, "other-token"),
	}
	if err := os.WriteFile(t.realFile, []byte(t.real+"\n"), 0o600); err != nil {
		return t, err
	}
	return t, os.WriteFile(t.otherFile, []byte("other-real-"+randomHex(36)+"\n"), 0o600)
}

// authFor is the Authorization header a path's client sends: the
// placeholder through the secrets' capsem-net, which puts the real value
// in its place, and a token of the same length that no policy knows
// elsewhere. The upstream refuses any other value, the placeholder
// included, so a request whose placeholder was not replaced fails the run.
func (b *bench) authFor(where string) string {
	if where == "mitm-secrets" {
		return "Bearer " + b.tokens.placeholder
	}
	return "Bearer " + b.tokens.plain
}

// writeUploadBody writes n bytes of the upload's body to path: the
// download's pattern ("bytes"), or JSON lines of English words ("text").
// The text is what an agent mostly uploads (prompts, code, tool output);
// letters and digits are where the secret and DLP matchers find candidate
// starts, so it is their harder case, where the pattern has every byte
// value in turn.
func writeUploadBody(path string, n int64, kind string) error {
	var block []byte
	switch kind {
	case "bytes":
		block = pattern
	case "text":
		block = textBlock(len(pattern))
	default:
		return fmt.Errorf("-ul-body %q: want bytes or text", kind)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for n > 0 {
		k := min(n, int64(len(block)))
		w.Write(block[:k])
		n -= k
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

var words = strings.Fields(`the a of to and in is it that for on with as this be are
request response model token agent file function return error value string
config server client build test package import module user assistant content
message tool result output input data json http https api key time index
list map read write open close run start stop update delete create select from
where when then else if not true false null 0 1 2 3 42 100 2048 v1 id name`)

// textBlock is n bytes of JSON lines of words, the same for every run.
func textBlock(n int) []byte {
	r := mrand.New(mrand.NewPCG(1, 2))
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(`{"role":"user","content":"`)
		for k := 8 + r.IntN(40); k > 0; k-- {
			sb.WriteString(words[r.IntN(len(words))])
			sb.WriteByte(' ')
		}
		sb.WriteString("\"}\n")
	}
	return []byte(sb.String()[:n])
}
