package main

import (
	"fmt"

	"github.com/capsem/capsem/bench/internal/guestns"
)

// policyTemplate is the policy of the direct, pass and mitm paths. DLP is
// off (it defaults to log) and there is no secret, so that the mitm path
// is interception alone: the baseline of mitm-secrets. With the mitm-h2up
// path of the HTTP/3 comparison, h2up.test (an upstream without HTTP/3) is
// allowed too; [quic] mode is left at its default, "intercept".
const policyTemplate = `[network]
default = "deny"
allow = ["mitm.test:443", "pass.test:443"%[3]s]

[upstream]
resolve = { "mitm.test" = "127.0.0.1:%[1]d", "pass.test" = "127.0.0.1:%[1]d"%[4]s }
ca_files = [%[2]q]

[tls]
passthrough = ["pass.test"]

[dlp]
action = "off"
`

// secretsPolicyTemplate is the policy of the mitm-secrets path: the same
// intercepted host, with a secret bound to it (its placeholder replaced in
// every request, its real value scrubbed from every response), a secret
// bound to another host (its placeholder and real value looked for as
// leaks in every request), and the DLP scan of every request with all
// detectors. The placeholder is fixed so that the load generator can send
// it without reading placeholders.json.
const secretsPolicyTemplate = `[network]
default = "deny"
allow = ["mitm.test:443"]

[upstream]
resolve = { "mitm.test" = "127.0.0.1:%[1]d" }
ca_files = [%[2]q]

[dlp]
action = "log"

[[secret]]
name = "BENCH_TOKEN"
from_file = %[3]q
hosts = ["mitm.test"]
placeholder = %[4]q

[[secret]]
name = "OTHER_TOKEN"
from_file = %[5]q
hosts = ["api.other.test"]
`

// startEnv starts a capsem-net and its guest namespace: with the policy of
// the mitm-secrets path when secrets is set, else with policyTemplate.
func (b *bench) startEnv(rep int, secrets bool) (*guestns.Env, error) {
	name := fmt.Sprintf("rep%d", rep)
	allowH2, resolveH2 := "", ""
	if b.upstreamH2 != nil {
		allowH2, resolveH2 = `, "h2up.test:443"`, fmt.Sprintf(`, "h2up.test" = "127.0.0.1:%d"`, b.upstreamH2.Port)
	}
	pol := fmt.Sprintf(policyTemplate, b.upPort, b.upstreamCA, allowH2, resolveH2)
	if secrets {
		name += "-secrets"
		pol = fmt.Sprintf(secretsPolicyTemplate, b.upPort, b.upstreamCA, b.tokens.realFile, b.tokens.placeholder, b.tokens.otherFile)
	}
	return guestns.Start(guestns.Config{
		CapsemNet: b.capsemNet, Root: b.dir, Name: name, Policy: pol,
		CADir: b.caDir, MTU: *flagMTU, ProfileDir: *flagProfile, Verbose: *flagVerbose,
	})
}

// stopEnvs stops the guests of the current repetition, mitmproxy's
// included.
func (b *bench) stopEnvs() {
	// Each is taken before it is stopped: a signal's cleanup (main) may
	// run this beside the repetition's.
	for _, e := range []**guestns.Env{&b.env, &b.senv} {
		if env := *e; env != nil {
			*e = nil
			env.Stop()
		}
	}
	if mp := b.mp; mp != nil {
		b.mp = nil
		mp.Stop()
	}
}
