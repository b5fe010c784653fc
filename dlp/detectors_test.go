package dlp

import (
	"slices"
	"strings"
	"testing"

	"github.com/capsem/capsem/dlp/dlptest"
)

// The detectors' names are a contract with policies and the MITM's
// reports.
func TestDetectorNames(t *testing.T) {
	want := []string{"aws-access-key", "aws-secret-key", "github-token", "anthropic-key", "openai-key",
		"google-api-key", "slack-token", "stripe-key", "private-key", "jwt"}
	if got := Detectors(); !slices.Equal(got, want) {
		t.Errorf("Detectors() = %q, want %q", got, want)
	}
	endLen := 0
	for _, r := range tokenRules {
		if len(r.prefix)+r.min < minRun {
			t.Errorf("rule %s: %d+%d bytes is shorter than minRun: the scanner would miss it", r.prefix, len(r.prefix), r.min)
		}
		if !r.anywhere || r.sep() >= 0 {
			continue
		}
		// Taken anywhere without a separator, a match is found where its
		// stretch of letters and digits ends: it must be exact, and all
		// such are one length (the scanner checks one place).
		if !r.exact || endLen != 0 && len(r.prefix)+r.min != endLen {
			t.Errorf("rule %s: taken anywhere without a separator, exact %v, length %d (others %d)", r.prefix, r.exact, len(r.prefix)+r.min, endLen)
		}
		endLen = len(r.prefix) + r.min
	}
}

func TestNewScanner(t *testing.T) {
	if _, err := NewScanner([]string{"jwt", "nope"}); err == nil || !strings.HasPrefix(err.Error(), "dlp: ") ||
		!strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "aws-secret-key") {
		t.Errorf("NewScanner with an unknown name: %v", err)
	}
	s, err := NewScanner([]string{"jwt"})
	if err != nil {
		t.Fatal(err)
	}
	if ms := s.ScanString("AKIAIOSFODNN7EXAMPLE " + jwtSample); len(ms) != 1 || ms[0].Detector != "jwt" {
		t.Errorf("a jwt-only scanner found %v", detectorsOf(ms))
	}
}

const jwtSample = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"

func detectorsOf(ms []Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Detector)
	}
	return out
}

var detectorCases = []struct {
	name  string
	input string
	want  []string
	why   string
}{
	{"aws AKIA", "id=AKIAIOSFODNN7EXAMPLE", []string{"aws-access-key"}, "AKIA + 16 [A-Z0-9]"},
	{"aws ASIA", `"ASIAY34FZKBOKMUTVV7A"`, []string{"aws-access-key"}, "temporary credentials"},
	{"aws ABIA", "ABIAZ7QW3ERTY5UIOP2A", []string{"aws-access-key"}, "ABIA prefix"},
	{"aws ACCA", "ACCAZ7QW3ERTY5UIOP2A ", []string{"aws-access-key"}, "ACCA prefix"},
	{"aws lower", "akiaiosfodnn7example", nil, "the prefix is upper case"},
	{"aws lower tail", "AKIAiosfodnn7example", nil, "the tail is upper case"},
	{"aws short", "AKIAIOSFODNN7EXAMPL ", nil, "15 after the prefix"},
	{"aws long", "AKIAIOSFODNN7EXAMPLEX", nil, "17 after the prefix: no word boundary"},
	{"aws glued", "xAKIAIOSFODNN7EXAMPLE", []string{"aws-access-key"}, "glued to a letter: passed before (AKIA is distinctive)"},
	{"aws glued a", "aAKIAIOSFODNN7EXAMPLE", []string{"aws-access-key"}, "the issue's example: passed before"},
	{"aws glued underscore", "key_AKIAIOSFODNN7EXAMPLE", []string{"aws-access-key"}, "'_' is a word byte: passed before"},
	{"aws glued digit", "1ASIAY34FZKBOKMUTVV7A", []string{"aws-access-key"}, "ASIA glued to a digit"},
	{"aws glued ABIA", "zABIAZ7QW3ERTY5UIOP2A.", []string{"aws-access-key"}, "ABIA glued"},
	{"aws glued long", "xAKIAIOSFODNN7EXAMPLEX", nil, "the end is still exact: 17 after the prefix"},
	{"aws glued in caps", "THEAKIAIOSFODNN7EXAMPLEKEYS", nil, "not ending where the word does"},
	{"aws glued long word", "averylongidentifiernameAKIAIOSFODNN7EXAMPLE", []string{"aws-access-key"}, "a glue longer than minRun: the scanner is in a run when the key starts"},
	{"aws ACCA glued", "xACCAZ7QW3ERTY5UIOP2A", nil, "ACCA is four hex digits: at a word start only"},
	{"aws ACCA in hex", "9F86D081884C7D659A2FEAA0ACCA5D5B0123456789ABCDEF", nil, "an upper-case digest holding ACCA 20 before its end"},
	{"aws secret env", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", []string{"aws-secret-key"}, "keyword then 40"},
	{"aws secret json", `{"AccessKeyId":"AKIAIOSFODNN7EXAMPLE","SecretAccessKey":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`,
		[]string{"aws-access-key", "aws-secret-key"}, "an STS response"},
	{"aws secret words", "aws secret: wJalrXUtnFEMI+K7MDENG/bPxRfiCYEXAMPLEKEY", []string{"aws-secret-key"}, "aws secret, spaced"},
	{"aws secret no keyword", "value=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", nil, "40 chars alone are no key"},
	{"aws secret far keyword", "aws_secret_access_key" + strings.Repeat(" ", 60) + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", nil, "keyword out of reach"},
	{"aws secret other line", "aws_secret_access_key\nwJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", nil, "keyword on another line"},
	{"aws secret 41", "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEYX", nil, "41 chars"},
	{"aws secret client_secret", `"client_secret": "0123456789abcdef0123456789abcdef01234567"`, nil, "a secret, but not AWS's"},
	{"github ghp", "token ghp_16C7e42F292c6912E7710c838347Ae178B4a", []string{"github-token"}, "ghp_ + 36"},
	{"github ghs", "ghs_16C7e42F292c6912E7710c838347Ae178B4a", []string{"github-token"}, "ghs_ + 36"},
	{"github ghr", "ghr_16C7e42F292c6912E7710c838347Ae178B4a", []string{"github-token"}, "ghr_ + 36"},
	{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghij", []string{"github-token"}, "github_pat_ + 22+"},
	{"github short", "ghp_16C7e42F292c6912E7710c838347Ae178B4", nil, "35 after the prefix"},
	{"github pat short", "github_pat_11ABCDEFG0123456789_a", nil, "21 after the prefix"},
	{"github ghx", "ghx_16C7e42F292c6912E7710c838347Ae178B4a", nil, "no such prefix"},
	{"github glued", "xghp_16C7e42F292c6912E7710c838347Ae178B4a", []string{"github-token"}, "the issue's example: passed before"},
	{"github glued underscore", "token_ghp_16C7e42F292c6912E7710c838347Ae178B4a", []string{"github-token"}, "'_' before: passed before"},
	{"github glued gho", "1gho_16C7e42F292c6912E7710c838347Ae178B4a", []string{"github-token"}, "glued to a digit"},
	{"github glued ghs ghu ghr", "aghs_16C7e42F292c6912E7710c838347Ae178B4a bghu_16C7e42F292c6912E7710c838347Ae178B4a cghr_16C7e42F292c6912E7710c838347Ae178B4a",
		[]string{"github-token", "github-token", "github-token"}, "each prefix glued"},
	{"github glued short", "xghp_16C7e42F292c6912E7710c838347Ae178B4", nil, "35 after the prefix"},
	{"github glued long word", "thisisalongwordgluedtothetokenxghp_16C7e42F292c6912E7710c838347Ae178B4a", []string{"github-token"}, "a glue longer than minRun"},
	{"github pat glued", "my_github_pat_11ABCDEFG0123456789_abcdefghij", []string{"github-token"}, "glued with '_': passed before"},
	{"github pat glued letter", "xgithub_pat_11ABCDEFG0123456789_abcdefghij", []string{"github-token"}, "glued to a letter: passed before"},
	{"github pat glued long word", "configuration_value_for_the_github_pat_11ABCDEFG0123456789_abcdefghij", []string{"github-token"}, "a glue longer than minRun"},
	{"github pat name", "load_github_pat_from_the_environment_variable", nil, "a name: no 16 letters and digits in a row with a digit"},
	{"github pat name at start", "github_pat_from_the_environment_variable", nil, "the same at a word start (a match before)"},
	{"github weighs", "weighs_AbCdEfGhIjKlMnOp", nil, "a word ending in ghs_ with a short tail"},
	{"anthropic", "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx", []string{"anthropic-key"}, "sk-ant- + 13+"},
	{"anthropic dns label", "sk-ant-api03-aaaaaaaaaaaa.exfil.example.com", []string{"anthropic-key"}, "cut by a DNS label"},
	{"anthropic short", "sk-ant-api03-abc", nil, "too few chars"},
	{"anthropic short not openai", "sk-ant-api03-abc12345678901234567890", []string{"anthropic-key"}, "sk-ant- is never openai"},
	{"anthropic 12", "sk-ant-api03-abcdef", nil, "12 after sk-ant-, not openai either"},
	{"anthropic glued", "xsk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx", []string{"anthropic-key"}, "glued to a letter: passed before"},
	{"anthropic glued underscore", "key_sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx", []string{"anthropic-key"}, "'_' before: passed before"},
	{"anthropic glued long word", "ANTHROPIC_API_KEY_VALUE_FOLLOWS_sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx", []string{"anthropic-key"}, "a glue longer than minRun"},
	{"anthropic glued dns", "asksk-ant-api03-aaaaaaaaaaaa.exfil.example.com", []string{"anthropic-key"}, "glued and cut by a DNS label"},
	{"openai legacy", "sk-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12", []string{"openai-key"}, "sk- + 48"},
	{"openai proj", "OPENAI_API_KEY=sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe", []string{"openai-key"}, "sk-proj-"},
	{"openai slug", "sk-learn-tutorial-basics-and-more", nil, "a slug: no 16 letters and digits with a digit"},
	{"openai no digit", "sk-abcdefghijklmnopqrstuvwxyzABCD", nil, "no digit"},
	{"openai in word", "task-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56", nil, "no word boundary before sk-: sk- ends words"},
	{"google", "key=AIzaSyD-1234567890abcdefghijklmnopqrstu&q=1", []string{"google-api-key"}, "AIza + 35"},
	{"google short", "AIzaSyD-1234567890abcdefghijklmnopqrst", nil, "34 after AIza"},
	{"google long", "AIzaSyD-1234567890abcdefghijklmnopqrstuv", nil, "36 after AIza"},
	{"google glued", "xAIzaSyD-1234567890abcdefghijklmnopqrstu", nil, "AIza is four letters base64 holds: at a word start only"},
	{"slack bot", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", []string{"slack-token"}, "xoxb-"},
	{"slack user", "xoxp-2222222222-3333333333-abcdefabcdef", []string{"slack-token"}, "xoxp-"},
	{"slack short", "xoxb-12345", nil, "too short"},
	{"slack xoxo", "xoxo-1234567890123456789", nil, "no such type"},
	{"slack glued", "tokxoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", []string{"slack-token"}, "glued to a letter: passed before"},
	{"slack glued long word", "the_slack_bot_token_isxoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", []string{"slack-token"}, "a glue longer than minRun"},
	{"slack glued underscore", "SLACK_xoxp-2222222222-3333333333-abcdefabcdef", []string{"slack-token"}, "'_' before: passed before"},
	{"stripe live", "sk_live_51HxQ2aBcDeFgHiJkLmNoPqRsTuV", []string{"stripe-key"}, "sk_live_ + 24+"},
	{"stripe restricted", "rk_live_51HxQ2aBcDeFgHiJkLmNoPqRsTuV", []string{"stripe-key"}, "rk_live_"},
	{"stripe test", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", []string{"stripe-key"}, "test keys count too"},
	{"stripe short", "sk_live_4eC39HqLyjWDarjtT1zdp7d", nil, "23 after the prefix"},
	{"stripe publishable", "pk_live_4eC39HqLyjWDarjtT1zdp7dc", nil, "a publishable key is public"},
	{"stripe glued", "task_test_shouldReturnAnErrorWhenEmpty", nil, "sk_/rk_ end words (task_, work_): at a word start only"},
	{"pem rsa", "-----BEGIN RSA PRIVATE KEY-----\nMIIE", []string{"private-key"}, "a PEM header"},
	{"pem openssh", "x -----BEGIN OPENSSH PRIVATE KEY-----", []string{"private-key"}, "the header alone"},
	{"pem pkcs8", "-----BEGIN PRIVATE KEY-----", []string{"private-key"}, "PKCS #8"},
	{"pem encrypted", "-----BEGIN ENCRYPTED PRIVATE KEY-----", []string{"private-key"}, "encrypted PKCS #8"},
	{"pem certificate", "-----BEGIN CERTIFICATE-----\nMIIB", nil, "a certificate is public"},
	{"pem public", "-----BEGIN PUBLIC KEY-----", nil, "a public key is public"},
	{"pem lower", "-----BEGIN rsa PRIVATE KEY-----", nil, "the label is upper case"},
	{"pem unfinished", "-----BEGIN RSA PRIVATE KEY---", nil, "not a whole header"},
	{"jwt", "Authorization: Bearer " + jwtSample, []string{"jwt"}, "three segments"},
	{"jwt two segments", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0", nil, "no signature"},
	{"jwt short sig", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc", nil, "signature too short"},
	{"jwt not json", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ4eHh4eHh4eHh4eA.SflKxwRJSMeKKF2QT4fwpMeJf36POk6y", nil, "the payload is no JSON object"},
	{"jwt short header", "eyJhIjoxfQ.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6y", nil, "a header shorter than any with alg"},
	{"placeholder", "capsem-secret-0123456789abcdef0123456789abcdef", nil, "capsem's own placeholder is no secret"},
	{"uuid", "id=550e8400-e29b-41d4-a716-446655440000", nil, "a UUID"},
	{"sha1", `"commit":"da39a3ee5e6b4b0d3255bfef95601890afd80709"`, nil, "a git hash: 40 chars but no keyword"},
	{"base64 blob", strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo+/", 20), nil, "base64 text"},
	{"two", "AKIAIOSFODNN7EXAMPLE ghp_16C7e42F292c6912E7710c838347Ae178B4a", []string{"aws-access-key", "github-token"}, "in order"},
}

func TestDetectors(t *testing.T) {
	for _, c := range detectorCases {
		got := detectorsOf(all.ScanString(c.input))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: ScanString(%q) = %q, want %q (%s)", c.name, c.input, got, c.want, c.why)
		}
	}
}

// Every planted secret is found, at the right place, by the detector
// Scrub names it after.
func TestDetectorsFindPlants(t *testing.T) {
	for _, p := range dlptest.Plants {
		if !slices.Contains(Detectors(), p.Kind) {
			continue // a header kind, Scrub's alone
		}
		for _, pre := range []string{"", "x ", "{\"k\":\""} {
			in := pre + p.Text + "\"\n"
			ms := all.ScanString(in)
			if len(ms) != 1 || ms[0].Detector != p.Kind {
				t.Errorf("ScanString(%q) = %q, want one %s", in, detectorsOf(ms), p.Kind)
				continue
			}
			if v := string(ms[0].Value); in[ms[0].Offset:int(ms[0].Offset)+len(v)] != v ||
				p.Kind != "private-key" && !strings.Contains(v, p.Needles[0]) { // a PEM match is its header
				t.Errorf("ScanString(%q): value %q at %d", in, v, ms[0].Offset)
			}
		}
	}
	for _, d := range Detectors() {
		if !slices.ContainsFunc(dlptest.Plants, func(p dlptest.Plant) bool { return p.Kind == d }) {
			t.Errorf("no plant of %s in dlptest", d)
		}
	}
}

// MaxValue bounds a match's value, not its detection.
func TestLongMatches(t *testing.T) {
	long := "sk-ant-api03-" + strings.Repeat("a1", 400)
	ms := all.ScanString(long + " ")
	if len(ms) != 1 || len(ms[0].Value) != MaxValue {
		t.Fatalf("a %d-byte key: %d matches", len(long), len(ms))
	}
	if got := Scrub(long + " x"); got != "[REDACTED:anthropic-key] x" {
		t.Errorf("Scrub of a long key = %q", got)
	}
	payload := "eyJ" + strings.Repeat("A", 3000) // decodes to no JSON: not a JWT
	if ms := all.ScanString("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + payload + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6y"); len(ms) != 0 {
		t.Errorf("a non-JSON payload: %q", detectorsOf(ms))
	}
}
