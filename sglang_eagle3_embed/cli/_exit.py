"""The exit-code contract of every command: 0 ok, 1 findings, 2 a bad invocation or unreadable input."""

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
