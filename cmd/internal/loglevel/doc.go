// Package loglevel reads the --log-level flag of capsem's commands (run,
// doctor, supervise, start) and of capsem-net, so that all of them take the
// same words and refuse the same way. It must never hold anything but the
// reading of that flag: where a command logs, and what, is the command's.
package loglevel
