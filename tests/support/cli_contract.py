"""The command line's contract (``cli/_exit.py``, README), shared by the CLI tests: exit 0 ok, 1
findings, 2 a bad invocation or unreadable input; never a traceback, nor an exception that only the
last-resort handler catches ("run with --debug for the traceback"); with ``--json`` stdout is one
strict JSON document (no NaN), an error included.

:func:`run` runs a command in this process (:func:`tests.support.in_process`) under a time limit;
:func:`assert_contract` checks what it gave; :func:`check_verdict` reads ``check``'s verdict."""

from __future__ import annotations

import contextlib
import json
import signal
import threading

from tests.support import in_process

__all__ = ["LIMIT_S", "Hung", "assert_contract", "check_verdict", "run", "strict_json"]

LIMIT_S = 60
"""Seconds one command may run before it counts as hung (a FIFO opened for reading blocks forever)."""


class Hung(BaseException):
    """A command ran past its time limit (a BaseException: no handler of the command catches it)."""


@contextlib.contextmanager
def time_limit(seconds: int):
    """Raise :class:`Hung` after ``seconds`` (SIGALRM: the main thread only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise Hung(f"the command ran for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run(*args, capfd=None, limit: int = LIMIT_S) -> tuple[int, str, str]:
    """``sglang-eagle3-embed ARGS`` in this process: (exit code, stdout, stderr). With pytest's
    ``capfd``, what libraries write to the file descriptors (logging handlers made before the
    redirect) is part of stderr."""
    if capfd is not None:
        capfd.readouterr()
    try:
        with time_limit(limit):
            code, out, err = in_process(*args)
    except Hung as hung:
        raise Hung(f"{hung}: sglang-eagle3-embed {' '.join(map(str, args))}") from None
    if capfd is not None:
        fd = capfd.readouterr()
        err += fd.out + fd.err
    return code, out, err


def strict_json(text: str):
    """``json.loads``, refusing NaN and Infinity (not JSON, though Python writes them)."""

    def reject(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=reject)


def assert_contract(code, out: str, err: str, as_json: bool = False):
    """The contract every run keeps; returns the JSON document with ``as_json``."""
    tail = (out[-3000:], err[-3000:])
    assert code in (0, 1, 2), (code, *tail)
    assert "Traceback" not in out + err, tail
    assert "run with --debug for the traceback" not in out + err, tail  # an unexpected exception
    if not as_json:
        return None
    document = strict_json(out)
    if code == 2 and isinstance(document, dict) and "error" in document:
        assert document["ok"] is False and document["exit_code"] == 2, document
    return document


def check_verdict(code, out: str, as_json: bool) -> str:
    """``check``'s verdict: "usage" (exit 2), "findings" (exit 1, or warnings), "help", or
    "healthy" (exit 0, no warning)."""
    if code == 2:
        return "usage"
    if code == 1:
        return "findings"
    if as_json:
        report = strict_json(out)
        if "usage" in report:
            return "help"
        return "findings" if any(f["severity"] == "warning" for f in report["findings"]) else "healthy"
    if out.startswith("usage:"):
        return "help"
    return "healthy" if ", 0 warning(s)," in out else "findings"
