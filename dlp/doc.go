// Package dlp knows credentials when it sees them: API keys and tokens of
// the common providers, credential headers written as text, Bearer tokens
// and PEM private keys. Scrub, ScrubHeader and ScrubArgv redact them to
// "[REDACTED:<kind>]" (capsem export --scrub); the MITM's data-loss scan
// of decrypted egress is its other user.
//
// It imports nothing of capsem's and does no I/O. It must never return a
// secret it recognised in what it redacts (a redaction matches no rule, so
// Scrub is idempotent), and never change text in which it recognised
// nothing.
package dlp
