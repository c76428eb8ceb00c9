// Package logsink is where a mount daemon's log lines go: standard error
// until it serves, then, when it was started by the mount helper, away
// from the terminal or pipe of whoever ran mount(8).
//
// A mount outlives the command that made it. A daemon that kept the
// caller's standard error would hold the caller's pipe open (`mount ...
// 2>&1 | cat` never returns) and lose its log once the reader is gone.
// So a Sink starts on standard error, where start-up errors belong, and
// Detach moves it, in this order of preference, to the log file the
// operator configured, to the systemd journal when standard error already
// is a journal stream (JOURNAL_STREAM), to syslog (/dev/log, which is the
// journal on systemd hosts), or to a fallback file; with none of them it
// discards them, saying so on standard error first. It then points the
// process's standard streams at /dev/null: it never keeps the caller's.
// Reopen, on SIGHUP, reopens the log file (or the fallback file) so that
// logrotate can move it.
package logsink
