// Command sandboxbench measures long-lived sandboxes beside `capsem run`,
// in one run on one machine (docs/BENCHMARKS.md has its figures and the
// command that made them):
//
//   - `capsem exec NAME -- true`, p50 and p99 over -execs runs, from the CLI
//     and from the Python client (sdk/python), beside `capsem run -- true`;
//   - `capsem start` of a stopped sandbox until it answers, beside
//     `capsem run -- true`;
//   - one idle supervisor's RSS (QEMU apart), and eight idle sandboxes of
//     512 MiB at once, each answering an exec;
//   - a 1 GiB file put into and got out of the guest through the API,
//     beside the same file copied through the 9p workspace with cp in the
//     guest.
//
// It needs root only where capsem does (the image build); it never leaves
// a sandbox behind.
package main
