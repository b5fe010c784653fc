package policy

import (
	"strings"
	"testing"
)

func TestQUICMode(t *testing.T) {
	for _, c := range []struct {
		src, want, why string
	}{
		{"", QUICIntercept, "no [quic] table: QUIC to allowed names is intercepted"},
		{"[quic]\n", QUICIntercept, "an empty [quic] table keeps the default"},
		{"[quic]\nmode = \"intercept\"\n", QUICIntercept, "intercept written out"},
		{"[quic]\nmode = \"block\"\n", QUICBlock, "block refuses QUIC"},
		{"quic = { mode = \"block\" }\n", QUICBlock, "an inline table is the same table"},
	} {
		if got := mustParse(t, c.src).QUICMode(); got != c.want {
			t.Errorf("%q: QUICMode() = %q, want %q (%s)", c.src, got, c.want, c.why)
		}
	}
	var nilPolicy *Policy
	if got := nilPolicy.QUICMode(); got != QUICBlock {
		t.Errorf("a nil policy's QUICMode() = %q, want %q: it denies everything, so it fails closed", got, QUICBlock)
	}
	if got := mustParse(t, "[quic]\nmode = \"block\"\n").Summarize().QUIC; got != QUICBlock {
		t.Errorf("Summarize().QUIC = %q, want %q", got, QUICBlock)
	}
	if got := DenyAll().Summarize().QUIC; got != QUICIntercept {
		t.Errorf("DenyAll().Summarize().QUIC = %q, want the default %q", got, QUICIntercept)
	}
}

func TestQUICErrors(t *testing.T) {
	for _, c := range []struct {
		src, want, why string
	}{
		{"[quic]\nmode = \"drop\"\n", `p.toml:2: quic mode "drop": write "intercept"`, "a mode capsem does not have names the two it has"},
		{"[quic]\nmode = \"Block\"\n", `p.toml:2: quic mode "Block": write "intercept"`, "modes are lower case, like every value of the file"},
		{"[quic]\nmode = \"\"\n", `p.toml:2: quic mode "": write "intercept"`, "an empty mode is not the default"},
		{"[quic]\nmode = true\n", `p.toml:2: quic.mode must be the string "intercept" or "block"`, "a bool is the wrong type"},
		{"[quic]\nmodes = \"block\"\n", `p.toml:2: unknown`, "a misspelt key is an error, not ignored"},
		{"quic = \"block\"\n", `p.toml:1: [quic] must be a table`, "the table written as a value"},
	} {
		_, err := Parse("p.toml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want it to contain %q (%s)", c.src, err, c.want, c.why)
		}
	}
}
