// Command pricing regenerates mitm/internal/pricing/prices.json, capsem's embedded
// table of model prices, from the npm package @pydantic/genai-prices.
//
// That package (MIT licensed, maintained by Pydantic at
// github.com/pydantic/genai-prices) ships its price data inside its
// JavaScript bundle, dist/index.js, as an object literal. This program
// fetches the package's tarball from the npm registry, checks it against the
// registry's sha512 integrity value, reads that literal with a small parser
// for JavaScript literals (no JavaScript is run), keeps the Anthropic, OpenAI
// and Google models and writes them in capsem's format.
//
// The npm registry is used because it is reachable where capsem is built;
// the same data is published as JSON in the project's GitHub repository.
//
// Usage (from the repository root):
//
//	go run ./tools/pricing                       # latest version
//	go run ./tools/pricing -version 0.1.8        # a pinned version
//	go run ./tools/pricing -tarball pkg.tgz      # offline, from `npm pack @pydantic/genai-prices`
//
// Then run `go test ./mitm/internal/pricing` and commit the diff of prices.json.
//
// What it must never do: run code from the package (it only parses a
// literal), accept a tarball whose sha512 does not match the registry's, or
// write a table it could not fully read.
package main
