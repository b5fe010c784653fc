// Package pricing estimates what a model call cost, from an embedded table
// of prices in US dollars per million tokens (input, output, cache read,
// cache write) for the models of Anthropic, OpenAI and Google.
//
// The table is prices.json, embedded at build time. It is generated, not
// written by hand: `go run ./tools/pricing` rebuilds it from the npm package
// @pydantic/genai-prices (MIT License; data maintained by Pydantic at
// https://github.com/pydantic/genai-prices). The file's "source",
// "source_published" and "retrieved" fields say which version it came from
// and when; [About] returns them. README.md beside this file says more.
//
// Lookup takes a model name as a provider's API carries it, dated and
// versioned variants included ("claude-sonnet-4-5-20250929",
// "models/gemini-2.5-flash", "gpt-4o-2024-08-06"): the source's own match
// rules are tried first, the most specific match winning; failing that, the
// longest model id that is a prefix of the name (at a '-', '.', '@', ':' or
// '_' boundary) is used.
//
// What it must never do: fetch anything at run time, or panic on a model
// name it does not know (it answers known=false). Its figures are estimates:
// batch and priority tiers, per-request tool fees and regional surcharges are
// not counted.
package pricing
