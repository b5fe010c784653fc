// The capsem this package was made with: package.json's "version", which
// restates version.Number of capsem's Go module (its one home;
// tests/clients_version_test.go checks they agree).

import { createRequire } from "node:module";

export const VERSION: string = (createRequire(import.meta.url)("../package.json") as { version: string }).version;
