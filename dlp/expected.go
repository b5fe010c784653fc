package dlp

import (
	"slices"
)

// expectedHosts are, by detector, the hosts where its credential is
// expected: the provider's own API, which is sent its key as the request's
// credential on every call (the claude CLI sends its key in X-Api-Key to
// api.anthropic.com on every request of a session). A name or "*.name"
// (any name below it, not the name itself), as the policy writes hosts.
//
// A detector with no home here has none: an AWS secret access key signs a
// request (SigV4) and is never sent, so a request that carries one leaks
// it wherever it goes; a private key is never a request's credential; a
// JWT belongs to whoever issued it, which no list can know.
//
// A host here is where the credential is sent as a credential, in the
// request's head: the caller that exempts a match decides where in a
// request (the MITM: the header and URL, not the body, where a key posted
// to a provider's host is data it stores or shows, a gist or a prompt).
var expectedHosts = [nDetectors][]string{
	// Every request to AWS signed with SigV4 names its access key id in
	// Authorization (Credential=AKIA…/date/region/service) or, presigned,
	// in the query (X-Amz-Credential): an identifier that the signature,
	// not the id, makes worth anything.
	dAWSAccessKey: {"*.amazonaws.com"},
	// The REST API, git over HTTPS, release uploads, and raw files of
	// private repositories (Authorization: token ghp_…).
	dGitHubToken:  {"github.com", "api.github.com", "uploads.github.com", "raw.githubusercontent.com"},
	dAnthropicKey: {"api.anthropic.com"},
	dOpenAIKey:    {"api.openai.com"},
	// Every Google API takes its key in the query (?key=AIza…) or
	// X-Goog-Api-Key: generativelanguage, maps, youtube, ….
	dGoogleAPIKey: {"*.googleapis.com"},
	// The Web API (slack.com/api/…) and workspaces' own names.
	dSlackToken: {"slack.com", "*.slack.com"},
	// The API and its file uploads.
	dStripeKey: {"api.stripe.com", "files.stripe.com"},
}

// ExpectedHosts returns the hosts where detector's credential is expected
// (nil for a detector that has none, or no such detector): names, and
// "*.name" patterns that match the names below name.
func ExpectedHosts(detector string) []string {
	d := slices.Index(detectorNames[:], detector)
	if d < 0 {
		return nil
	}
	return slices.Clone(expectedHosts[d])
}
