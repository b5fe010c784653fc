// Command capsem is the user-facing CLI: today it reports its version and
// points at capsem-net; `capsem run`, `capsem export --sqlite`, `capsem
// sessions` and `capsem inspect` arrive with their issues.
package main
