"""Which tests run SGLang's own code, measured: the ``releases`` marker is checked, not hoped for.

The older-releases phase of CI (``tools/releases.py``) runs only the tests marked ``releases``
against SGLang 0.5.21 and 0.5.22. A test is version-sensitive when SGLang's code runs for it, in
its process or in one it starts; such a test left unmarked would never meet the older releases.
So every process of the CPU suite runs SGLang's Python code through this module:

- :func:`install` puts an import hook before every other: each ``sglang`` module is compiled from
  its source with one call added at the top of every function body, :func:`touched`, which records
  the test running at that moment (``PYTEST_CURRENT_TEST``, which pytest sets and child processes
  inherit). The compiled code is cached beside the source's size and time (never in SGLang's own
  ``__pycache__``). Module and class bodies are not counted: importing SGLang is not running it.
- The pytest process points ``PYTEST_CURRENT_TEST`` at the fixture while a fixture is set up, so
  SGLang's code run by a shared fixture counts for every test that uses it.
- Child processes install the hook through ``sitecustomize`` (``sglang_touch_site`` on
  ``PYTHONPATH``) and write what they record to :data:`DIR_ENV`'s folder at once.
- After each test, :func:`ran_sglang`: a test that ran SGLang's code and is not marked ``releases``
  fails the session, listed with the fix (``tests/conftest.py``, which gathers xdist workers'
  findings). A marked test that ran none is listed, not failed: a value cached by an earlier test
  (SGLang's own ``lru_cache`` or ours) can hide the code behind it, so "ran none" depends on the
  order xdist gives the tests, while "ran some" never lies.

Standard library only: the child processes load it by path, before anything else.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import sys
from pathlib import Path

DIR_ENV = "EAGLE3_EMBED_SGLANG_TOUCH_DIR"
"""The folder where every process of one pytest run writes the tests it saw run SGLang's code."""
KEY = "PYTEST_CURRENT_TEST"
HOOK = "__eagle3_embed_sglang_touched__"
"""The name (in ``builtins``) the added call looks up: every instrumented module finds it."""
SITE = Path(__file__).with_name("sglang_touch_site")
_MAGIC = importlib.util.MAGIC_NUMBER.hex()

PROCESS_WIDE = (
    "sglang.srt.utils.hf_transformers_patches",
    "sglang.srt.utils.patch_torch",
    "sglang.srt.distributed.parallel_state",
    "sglang.srt.plugins",
)
"""Not instrumented: what SGLang sets up once per process or installs into other libraries, which
runs for whichever test comes first, not for what a test does: its patches to transformers and
torch (transformers' own config code calls them once SGLang is imported), its distributed state
and its plugin loading (``sglang.srt.plugins`` and its hook registry)."""

_PROCESS_SETUP = os.path.join("doctor", "sglang_cpu.py")
"""The project's own once-per-process SGLang setup (``sglang_cpu.init``: the gloo world, the
published ServerArgs): it runs for whichever test comes first. Not counted either."""

_hits: dict[str | None, str] = {}
"""The ``PYTEST_CURRENT_TEST`` values (``NODEID (setup)``, ``NODEID (call)``, ``NODEID (teardown)``,
or a fixture's key) seen running SGLang's code in this process, each with the first SGLang module."""
_environ = os.environ
_owner = -1
"""The pid of the pytest process that reads the records (its own are kept in memory)."""


def touched(module: str) -> None:
    """The call added to every SGLang function: records the running test the first time. A call
    made while a module is imported does not count: what an import runs is the same whichever test
    happens to import first."""
    value = _environ.get(KEY)
    if value in _hits:
        return
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib._bootstrap") or (
            code.co_name == "init" and code.co_filename.endswith(_PROCESS_SETUP)
        ):
            return
        frame = frame.f_back
    _hits[value] = module
    folder = _environ.get(DIR_ENV)
    if folder and value is not None and os.getpid() != _owner:
        # a child process: the pytest process reads this file; one line per key, written at once
        # (a server killed at the end of its test never reaches atexit)
        with open(os.path.join(folder, f"child-{os.getpid()}"), "a") as f:
            f.write(f"{value}\t{module}\n")


class _Instrument(ast.NodeTransformer):
    def __init__(self, module: str):
        self.module = module

    def _call(self, node):
        body = node.body
        at = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else 0
        anchor = body[min(at, len(body) - 1)]
        call = ast.Expr(
            ast.Call(ast.Name(HOOK, ast.Load()), [ast.Constant(self.module)], []),
        )
        body.insert(at, ast.copy_location(call, anchor))
        self.generic_visit(node)
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = _call


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sglang-eagle3-embed" / "sglang-touch"


class _Loader(importlib.machinery.SourceFileLoader):
    """SGLang's source with the call added, compiled once per source version into our own cache."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        stat = os.stat(path)
        tag = hashlib.sha256(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0{_MAGIC}".encode()).hexdigest()
        cached = _cache_dir() / f"{tag[:32]}.bin"
        try:
            return marshal.loads(cached.read_bytes())
        except (OSError, ValueError, EOFError):
            pass
        tree = _Instrument(fullname).visit(ast.parse(self.get_data(path), filename=path))
        code = compile(ast.fix_missing_locations(tree), path, "exec", dont_inherit=True)
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            temporary = cached.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_bytes(marshal.dumps(code))
            os.replace(temporary, cached)
        except OSError:
            pass
        return code


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if (fullname != "sglang" and not fullname.startswith("sglang.")) or fullname.startswith(PROCESS_WIDE):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        spec.loader = _Loader(fullname, spec.origin)
        return spec


def install(owner: bool = False) -> None:
    """Instrument every SGLang module imported from now on. ``owner``: this is the pytest process,
    which keeps its records in memory (child processes write theirs to :data:`DIR_ENV`)."""
    global _owner
    if owner:
        _owner = os.getpid()
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    # Stubs without a file (the GPU bundle's sitecustomize puts two there) hold no SGLang code.
    early = sorted(
        name
        for name, module in list(sys.modules.items())
        if (name == "sglang" or name.startswith("sglang.")) and getattr(module, "__file__", None)
    )
    if early:
        raise RuntimeError(
            f"sglang_touch.install: SGLang was imported before the hook ({early[:3]}): its functions "
            "would run unseen. Install it before anything imports SGLang."
        )
    setattr(builtins, HOOK, touched)
    sys.meta_path.insert(0, _Finder())


def fixture_key(fixturedef) -> str:
    return f"fixture {fixturedef.baseid}::{fixturedef.argname}"


_children: dict[str, str] = {}
"""What child processes recorded, read so far (:func:`_child_hits`)."""
_read_to: dict[Path, int] = {}
"""How far each child's file has been read."""


def _child_hits() -> dict[str, str]:
    """What child processes recorded, each file read on from where the last call stopped: once per
    test, without reading every earlier record again."""
    folder = os.environ.get(DIR_ENV)
    for path in Path(folder).glob("child-*") if folder else ():
        start = _read_to.get(path, 0)
        try:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            continue
        whole = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
        _read_to[path] = start + len(whole)
        for line in whole.decode().splitlines():
            key, _, module = line.partition("\t")
            _children.setdefault(key, module)
    return _children


def ran_sglang(nodeid: str, fixture_keys) -> str | None:
    """The first SGLang module that ran for one test (in its setup or its call, or in a fixture it
    uses), or None. Teardown is cleanup (a session fixture's finalizer runs in whichever test's
    teardown is last)."""
    hits = {**_child_hits(), **_hits}
    return next(
        (hits[k] for k in (f"{nodeid} (setup)", f"{nodeid} (call)", *fixture_keys) if k in hits), None
    )
