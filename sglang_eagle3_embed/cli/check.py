"""``sglang-eagle3-embed check``: the startup rules on any launch command line, without a GPU.

The command only: its arguments are SGLang's (everything after ``check``), the work is
:mod:`sglang_eagle3_embed.doctor.check` (imports sglang only when run).
"""

from __future__ import annotations

import json

from sglang_eagle3_embed.cli._exit import EXIT_FINDINGS, EXIT_OK
from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.core.findings import Severity

__all__ = ["CHECK_USAGE", "add_parser", "run"]

CHECK_USAGE = """usage: sglang-eagle3-embed check [--json] [--gpu h100|h20|h200|b200] <arguments of python -m sglang.launch_server>
       sglang-eagle3-embed check [--json] [--gpu NAME] <one side's arguments> --pd-peer <the other side's arguments>

Validate a deployment without its GPU: SGLang's own argument resolution, answered as the serving
machine's GPU would answer it (--gpu; h200 by default where no GPU is visible), then every rule of
docs/validation.md on the configs and the weights' headers (no tensor is read). A rule that could
not be evaluated says "not checked" and why. Exit 0: no error; 1: errors; 2: a bad invocation or a
model that is not there.

PD disaggregation (docs/pd.md): everything after --pd-peer is the other server's launch arguments,
one --disaggregation-mode prefill and one --disaggregation-mode decode, in either order. Each side
is checked as above, then the two are compared: the models, --model-impl, the speculative settings,
the tensors each side feeds the draft, page size, KV-cache dtype and transfer backend; a mismatch
is an error naming the side and the flag."""


def add_parser(sub) -> None:
    """``check`` in the command list; its arguments are SGLang's, parsed by :func:`run`."""
    sub.add_parser("check", help="validate a launch command line without a GPU", add_help=False)


def _gpu(argv: list[str]) -> tuple[list[str], str | None]:
    """``argv`` without check's own ``--gpu NAME`` (or ``--gpu=NAME``), and that name."""
    rest, gpu, args = [], None, iter(argv)
    for arg in args:
        if arg == "--gpu":
            gpu = next(args, None)
            if gpu is None:
                raise InputError("--gpu needs a GPU name: h100, h20, h200 or b200")
        elif arg.startswith("--gpu="):
            gpu = arg.partition("=")[2]
        else:
            rest.append(arg)
    return rest, gpu


PEER = "--pd-peer"


def _peer(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``argv`` split at ``--pd-peer``: this side's launch arguments and the other side's (None
    without ``--pd-peer``)."""
    usage = f"check <one side's launch arguments> {PEER} <the other side's launch arguments>"
    if any(a.startswith(f"{PEER}=") for a in argv):
        raise InputError(
            f"{PEER} takes no value: everything after it is the other side's launch arguments ({usage})"
        )
    if PEER not in argv:
        return argv, None
    if argv.count(PEER) > 1:
        raise InputError(f"{PEER} given {argv.count(PEER)} times; a PD pair has two sides ({usage})")
    i = argv.index(PEER)
    first, peer = argv[:i], argv[i + 1 :]
    if not first:
        raise InputError(f"{PEER} needs one side's launch arguments before it ({usage})")
    if not peer:
        raise InputError(f"{PEER} needs the other side's launch arguments after it ({usage})")
    return first, peer


def run(argv: list[str]) -> int:
    """``check ARGV``: everything after ``check`` belongs to SGLang's parser, except ``--json``,
    ``--gpu NAME``, ``--pd-peer`` (the other side of a PD pair follows it) and a ``-h``/``--help``
    anywhere, which print check's own usage (JSON with ``--json``)."""
    as_json = "--json" in argv
    if not argv:
        print(CHECK_USAGE)
        raise InputError("check needs the arguments of python -m sglang.launch_server")
    if "-h" in argv or "--help" in argv:
        print(json.dumps({"ok": True, "usage": CHECK_USAGE}, indent=2) if as_json else CHECK_USAGE)
        return EXIT_OK
    argv, gpu = _gpu([a for a in argv if a != "--json"])
    argv, peer = _peer(argv)
    if peer is not None:
        from sglang_eagle3_embed.doctor.pd_check import check_pair, render_pair_json, render_pair_table

        pair = check_pair(argv, peer, gpu)
        print(render_pair_json(pair) if as_json else render_pair_table(pair))
        return EXIT_OK if pair.ok else EXIT_FINDINGS
    from sglang_eagle3_embed.doctor.check import LaunchArgumentsError, check_launch, render_json, render_table

    try:
        found = check_launch(argv, gpu)
    except LaunchArgumentsError as exc:
        raise InputError(str(exc)) from None
    print(render_json(found) if as_json else render_table(found))
    findings = found.findings
    return EXIT_FINDINGS if any(f.severity is Severity.ERROR for f in findings) else EXIT_OK
