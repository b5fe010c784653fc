// Package dlp knows credentials when it sees them. Its detectors, named
// once in Detectors (aws-access-key, aws-secret-key, github-token,
// anthropic-key, openai-key, google-api-key, slack-token, stripe-key,
// private-key, jwt), find the API keys and tokens of the common
// providers, AWS secret keys by their keywords, PEM private keys and
// JWTs, with high confidence only: a literal prefix or keyword and the
// shape that follows it, no guess by entropy. A match starts at a word's
// start, or anywhere for the prefixes distinctive enough (ghp_, sk-ant-,
// xoxb-, AKIA, …: detectors.go says why each is) that a guest gluing a
// token to a word ("xghp_…") does not hide it.
//
// A Scanner runs them for the MITM's data-loss scan of decrypted egress:
// over a whole header value or URL (ScanString), or over a request body
// of any size that arrives in writes of any size (Stream), finding in it
// what ScanString finds in the whole, each match once, and telling how
// much of the stream is decided (Safe) so that a caller that refuses
// requests holding a secret forwards none of it. ExpectedHosts says where
// each detector's credential is expected (a provider's key at the
// provider's API host, anthropic-key at api.anthropic.com), which the
// caller does not take for a finding. Scrub, ScrubHeader and
// ScrubArgv redact what the detectors find, the values of credential
// headers written as text and Bearer tokens to "[REDACTED:<kind>]"
// (capsem export --scrub).
//
// It imports nothing of capsem's and does no I/O. A Match's Value is the
// secret itself, for the caller to compare with the values it exempts: it
// must never reach a log, an event or anything else meant for storage,
// and this package never puts it in an error. Scrub must never return a
// secret it recognised in what it redacts (a redaction matches no rule,
// so Scrub is idempotent), and never change text in which it recognised
// nothing.
package dlp
