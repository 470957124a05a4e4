"""The exit-code contract of every command: 0 ok, 1 findings, 2 a bad invocation or unreadable input,
130 interrupted (Ctrl-C: 128 + SIGINT, as a shell reports a command the signal stopped)."""

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
