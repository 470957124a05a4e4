"""``sglang-eagle3-embed``: the command line (no GPU needed; not imported by a server).

- ``ids`` explains which target tensors a draft config selects, under the plugin and under stock
  SGLang 0.5.23 (pure: imports neither torch nor sglang);
- ``check`` validates a deployment: the same arguments as ``sglang.launch_server``, resolved by
  SGLang's own argument resolution on the CPU, configs only (imports sglang when run);
- ``probe`` measures a draft under each candidate wiring and tells which one it was trained for
  (``--expectations FILE``: what a correctly wired server must show);
- ``canary`` asks a running server (or PD router) whether it feeds the draft those tensors, by its
  accept length on the recorded prompts;
- ``demo`` shows the failure and the fix on the tiny pair, on CPU;
- ``pair`` builds (or finds in the cache) a tiny target/draft pair of a given size.

Exit status of every command: 0 ok; 1 findings (the deployment or the draft is wrong, or the plugin
misreads it); 2 a bad invocation or unreadable input, with the path or flag and what to do; 130
interrupted (Ctrl-C), in one line. Input a
user can get wrong never ends in a traceback (``--debug`` shows one); with ``--json`` the output is
JSON, errors included.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from sglang_eagle3_embed import __version__
from sglang_eagle3_embed.cli import canary, check, demo, ids, pair, probe
from sglang_eagle3_embed.cli._exit import EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from sglang_eagle3_embed.core.errors import InputError

__all__ = ["EXIT_FINDINGS", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "main"]

COMMANDS = (ids, check, probe, canary, demo, pair)  # one module each: add_parser(sub), run(args)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors follow the contract (JSON with --json) instead of exiting itself."""

    def error(self, message):
        raise InputError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sglang-eagle3-embed",
        description=__doc__.splitlines()[0],
        epilog="Exit status: 0 ok, 1 findings, 2 a bad invocation or unreadable input, 130 interrupted. "
        "--debug (any command) shows the traceback of an error.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def _fail(message: str, as_json: bool, debug: bool, code: int = EXIT_USAGE, prefix: str = "error: ") -> int:
    if debug:
        traceback.print_exc()
    if as_json:
        print(json.dumps({"ok": False, "error": message, "exit_code": code}, indent=2))
    else:
        print(f"sglang-eagle3-embed: {prefix}{message}", file=sys.stderr)
    return code


def _interrupted(argv: list[str], as_json: bool, debug: bool) -> int:
    """Ctrl-C: one line naming the command (JSON with --json), exit 130; --debug adds the traceback."""
    names = {c.__name__.rsplit(".", 1)[-1] for c in COMMANDS}
    command = next((a for a in argv if a in names), "")
    if as_json:
        return _fail(f"{command} interrupted".strip(), True, debug, EXIT_INTERRUPTED)
    return _fail("interrupted", False, debug, EXIT_INTERRUPTED, f"{command}: " if command else "")


def _json_help(argv: list[str]) -> int:
    """``--help`` or ``--version`` with ``--json``: argparse's text as one JSON document."""
    if "--version" in argv and not {"-h", "--help"} & set(argv):
        print(json.dumps({"ok": True, "version": __version__}, indent=2))
        return EXIT_OK
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    command = next((a for a in argv if a in commands), None)
    text = (commands[command] if command else parser).format_help()
    print(json.dumps({"ok": True, "command": command, "help": text}, indent=2))
    return EXIT_OK


PLATFORM_WARNINGS = r"Only CUDA\b[\w ,]* support (AWQ|GGUF quantization) currently"
"""What SGLang 0.5.23 warns on importing its quantization modules on a machine without CUDA
(``srt/layers/quantization/awq/awq.py:53``, ``gguf.py:76,98``): true of the machine the command runs
on, not of the deployment it judges, so it is not printed above the report."""


def main(argv: list[str] | None = None) -> int:
    import warnings

    warnings.filterwarnings("ignore", message=PLATFORM_WARNINGS, category=UserWarning)
    as_program = argv is None  # the console script or `python -m`: this process is the command
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    as_json = "--json" in argv
    if not argv:
        build_parser().print_help()
        return EXIT_OK
    try:
        if argv[0] == "check":  # everything after `check` belongs to SGLang's parser
            return check.run(argv[1:])
        if as_json and {"-h", "--help", "--version"} & set(argv):
            return _json_help(argv)
        args = build_parser().parse_args(argv)
        return args.func(args)
    except InputError as exc:
        return _fail(str(exc), as_json, debug)
    except KeyboardInterrupt:  # Ctrl-C, at any point of a command: never a traceback
        code = _interrupted(argv, as_json, debug)
        if as_program:
            # a library interrupted half-way (torch mid-import, a lock being released) can raise it
            # again while the interpreter shuts down and end the process with the signal's status
            # instead: leave now, with 130
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return code
    except Exception as exc:  # never a traceback for a user; --debug shows it
        return _fail(f"{type(exc).__name__}: {exc} (run with --debug for the traceback)", as_json, debug)


if __name__ == "__main__":
    sys.exit(main())
