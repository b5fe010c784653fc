// Package dlptest holds the planted secrets the tests of dlp and of its
// users (the export's --scrub) check: one home for the fixture, so that a
// kind added to dlp is planted everywhere it is scrubbed.
package dlptest

// A Plant is a piece of text holding a secret; none of its needles may
// survive scrubbing, and the text must be redacted as kind.
type Plant struct {
	Kind    string
	Text    string
	Needles []string
}

// Plants hold one secret of each kind Scrub knows, in the shapes it
// meets them: every detector of dlp.Detectors and the header kinds.
var Plants = []Plant{
	{"anthropic-key", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEf", []string{"AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"}},
	{"openai-key", "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe", []string{"Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe"}},
	{"openai-key", "sk-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12", []string{"Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12"}},
	{"google-api-key", "AIzaSyD-1234567890abcdefghijklmnopqrstu", []string{"SyD-1234567890abcdefghijklmnopqrstu"}},
	{"github-token", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB", []string{"1234567890abcdefghijklmnopqrstuvwxyzAB"}},
	{"github-token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRS", []string{"11ABCDEFG0123456789_abcdefghij"}},
	{"aws-access-key", "AKIAIOSFODNN7EXAMPLE", []string{"IOSFODNN7EXAMPLE"}},
	{"aws-access-key", "ASIAY34FZKBOKMUTVV7A", []string{"Y34FZKBOKMUTVV7A"}},
	{"aws-access-key", "ABIAZ7QW3ERTY5UIOP2A", []string{"Z7QW3ERTY5UIOP2A"}},
	{"aws-secret-key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", []string{"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}},
	{"aws-secret-key", `"SecretAccessKey": "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"`, []string{"je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"}},
	{"github-token", "gho_16C7e42F292c6912E7710c838347Ae178B4a", []string{"16C7e42F292c6912E7710c838347Ae178B4a"}},
	{"stripe-key", "sk_live_51HxQ2aBcDeFgHiJkLmNoPqRsTuVwXyZ0123", []string{"51HxQ2aBcDeFgHiJkLmNoPqRsTuVwXyZ0123"}},
	{"stripe-key", "rk_test_4eC39HqLyjWDarjtT1zdp7dc", []string{"4eC39HqLyjWDarjtT1zdp7dc"}},
	{"jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
		[]string{"eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"}},
	{"slack-token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", []string{"123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"}},
	{"slack-token", "xoxp-2222222222-3333333333-abcdefabcdef", []string{"2222222222-3333333333-abcdefabcdef"}},
	{"bearer", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		[]string{"eyJhbGciOiJIUzI1NiJ9", "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"}},
	{"bearer", "bearer opaque-token-QwErTy123456", []string{"opaque-token-QwErTy123456"}},
	{"authorization", "Authorization: Basic dXNlcjpwYXNzd29yZA==", []string{"dXNlcjpwYXNzd29yZA"}},
	{"authorization", `{"authorization": "Token tok-8s7d6f5g4h3j"}`, []string{"tok-8s7d6f5g4h3j"}},
	{"authorization", "proxy-authorization: Digest pr0xy-s3cret", []string{"pr0xy-s3cret"}},
	{"x-api-key", "x-api-key: plainkey-0f9e8d7c6b5a", []string{"plainkey-0f9e8d7c6b5a"}},
	{"x-api-key", `{\"x-api-key\":\"esc4ped-k3y-value\"}`, []string{"esc4ped-k3y-value"}},
	{"x-api-key", "/v1/x?x-api-key=qu3ry-k3y-123&other=1", []string{"qu3ry-k3y-123"}},
	{"cookie", "Cookie: session=c00kie-v4lue-123; theme=dark", []string{"c00kie-v4lue-123"}},
	{"set-cookie", "Set-Cookie: sid=s3tc00kie-999; HttpOnly; Secure", []string{"s3tc00kie-999"}},
	{"private-key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq98pemKeyBody\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n-----END RSA PRIVATE KEY-----",
		[]string{"MIIEowIBAAKCAQEA7bq98pemKeyBody", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo"}},
	{"private-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", // cut off by a preview limit
		[]string{"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"}},
	{"private-key", "-----BEGIN PRIVATE KEY-----\r\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49Awe\r\n-----END PRIVATE KEY-----", []string{"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49Awe"}},
}

// CredentialHeaders are header values that are secrets only because of the
// header they are in.
var CredentialHeaders = []Plant{
	{"authorization", "Authorization|Basic dXNlcjpwYXNzd29yZA==", []string{"dXNlcjpwYXNzd29yZA"}},
	{"authorization", "proxy-authorization|Negotiate bmVnb3RpYXRlLXRva2Vu", []string{"bmVnb3RpYXRlLXRva2Vu"}},
	{"x-api-key", "X-Api-Key|plainkey-0f9e8d7c6b5a", []string{"plainkey-0f9e8d7c6b5a"}},
	{"x-api-key", "x-goog-api-key|g00gheaderval", []string{"g00gheaderval"}},
	{"cookie", "Cookie|session=c00kie-v4lue-123; theme=dark", []string{"c00kie-v4lue-123"}},
	{"set-cookie", "Set-Cookie|sid=s3tc00kie-999; HttpOnly", []string{"s3tc00kie-999"}},
}
