"""The import contract that keeps the layout honest (CONTRIBUTING.md, "Layout").

Read from the source with ``ast``, so that imports inside functions (the lazy ones a server only
reaches on some paths) count as much as those at the top of a module:

1. the pure core (``sglang_eagle3_embed``, ``core``, ``activation``) imports neither torch nor
   sglang, directly or through another module of the package;
2. a server process, which loads ``sglang_eagle3_embed.plugin:register`` and whatever it pulls in,
   imports nothing of the wiring doctor or the command line;
3. the package never imports code from outside it: tests, tools, benchmarks or the harness;
4. the test and benchmark harness (``harness/``, outside the package) imports the package only:
   never tests, tools or benchmarks;
5. nothing outside ``tests/`` (the package, ``benchmarks/``, ``tools/``, ``examples/``) imports
   ``tests``;
6. ``tests/`` never imports ``benchmarks``, except the benchmarks' own tests
   (``tests/integration/benchmarks/``: they exist to run and import the benchmark scripts). The
   tests that need what a benchmark uses import it from the harness, as the benchmark does;
7. nothing edits ``sys.path``: every import resolves by its package name;
8. the core's subpackages import in one direction (:data:`CORE_LAYERS`): ``capture`` (all a worker
   imports of the core) nothing of the others, ``readers`` the capture vocabulary, ``pd`` both,
   ``rules`` all three, ``canary`` the readers; the shared modules at the top of ``core`` none.

``test_the_contract_catches_a_planted_import`` shows rules 1-6 and 8 failing on planted violations,
``test_a_planted_sys_path_edit_is_found`` rule 7.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = "sglang_eagle3_embed"
HEAVY = {"torch", "sglang", "transformers", "safetensors"}
PURE = (f"{PACKAGE}.core", f"{PACKAGE}.activation")  # and the package's own __init__
SERVER_ENTRY = f"{PACKAGE}.plugin"
HARNESS = "harness"
NOT_IN_A_SERVER = (f"{PACKAGE}.doctor", f"{PACKAGE}.cli")
OUTSIDE = ("tests", "tools", "benchmarks", HARNESS)
"""The top-level folders beside the package, none of which it may import (rule 3)."""
SCANNED = (PACKAGE, HARNESS, "tests", "benchmarks", "tools", "examples")
"""The top-level folders whose every Python file the contract reads."""
CORE = f"{PACKAGE}.core"
CORE_LAYERS = {
    "capture": set(),
    "readers": {"capture"},
    "pd": {"capture", "readers"},
    "rules": {"capture", "readers", "pd"},
    "canary": {"capture", "readers"},
}
"""Each subpackage of the core -> the subpackages it may import (rule 8)."""
BENCHMARK_TESTS = "tests.integration.benchmarks"
"""The one part of the tests that imports ``benchmarks`` (rule 6)."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, name: str, is_package: bool) -> set[str]:
    """Every module ``source`` imports, absolute, at any depth of the code."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import mod`
    return found


def sources_of(tops=(PACKAGE,)) -> dict[str, tuple[str, bool]]:
    """Module -> (its source, whether it is a package's ``__init__``), for every Python file under
    the top-level folders ``tops``."""
    return {
        module_name(p): (p.read_text(), p.name == "__init__.py")
        for top in tops
        for p in (ROOT / top).rglob("*.py")
    }


def package_graph(sources: dict[str, tuple[str, bool]] | None = None) -> dict[str, set[str]]:
    """Module -> the modules it imports, for every module of ``sources`` (the package's by default)."""
    if sources is None:
        sources = sources_of()
    return {name: imports_of(text, name, is_package) for name, (text, is_package) in sources.items()}


def within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def reach(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """The package modules ``start`` imports, transitively: module -> the module that imports it."""
    seen, todo = {start: ""}, [start]
    while todo:
        current = todo.pop()
        for imported in graph.get(current, ()):
            # `import a.b.c` also runs a and a.b
            parts = imported.split(".")
            for k in range(1, len(parts) + 1):
                module = ".".join(parts[:k])
                if module in graph and module not in seen:
                    seen[module] = current
                    todo.append(module)
    return seen


def chain(seen: dict[str, str], module: str) -> str:
    path = [module]
    while seen[path[-1]]:
        path.append(seen[path[-1]])
    return " <- ".join(path)


def core_part(module: str) -> str | None:
    """The subpackage of the core ``module`` is in, ``""`` for a shared module at the core's top,
    ``None`` outside the core."""
    if not within(module, (CORE,)) or module == CORE:
        return None
    part = module.removeprefix(CORE + ".").split(".")[0]
    return part if part in CORE_LAYERS else ""


def violations(graph: dict[str, set[str]], outside_names: set[str]) -> list[str]:
    """Every broken rule, one line each. ``graph`` holds the package's modules and may hold those of
    the other scanned folders (rules 5 and 6)."""
    others = {m: imported for m, imported in graph.items() if not within(m, (PACKAGE,))}
    graph = {m: imported for m, imported in graph.items() if within(m, (PACKAGE,))}
    found = []
    for module in graph:
        if module != PACKAGE and not within(module, PURE):
            continue
        seen = reach(graph, module)
        for reached in seen:
            heavy = sorted({i.split(".")[0] for i in graph[reached]} & HEAVY)
            if heavy:
                found.append(f"pure {module} imports {heavy}: {chain(seen, reached)}")
    seen = reach(graph, SERVER_ENTRY)
    found += [
        f"a server imports {m}: {chain(seen, m)}" for m in seen if within(m, NOT_IN_A_SERVER) and m in graph
    ]
    for module, imported in graph.items():
        bad = sorted(i for i in imported if i.split(".")[0] in OUTSIDE or i.split(".")[0] in outside_names)
        if bad:
            found.append(f"{module} imports code from outside the package: {bad}")
    for module, imported in graph.items():
        part = core_part(module)
        if part is None:
            continue
        allowed = {part} | CORE_LAYERS.get(part, set())
        bad = sorted(i for i in imported if core_part(i) and core_part(i) not in allowed)
        if bad:
            found.append(f"{module} (core.{part or 'shared'}) imports {bad}: against CORE_LAYERS")
    for module, imported in others.items():
        if within(module, (HARNESS,)):
            bad = sorted(i for i in imported if within(i, OUTSIDE) and not within(i, (HARNESS,)))
            if bad:
                found.append(f"{module} (the harness) imports {bad}: it may import the package only")
        tests = sorted(i for i in imported if within(i, ("tests",)))
        if tests and not within(module, ("tests",)):
            found.append(f"{module} imports the tests package: {tests}")
        benchmarks = sorted(i for i in imported if within(i, ("benchmarks",)))
        if benchmarks and within(module, ("tests",)) and not within(module, (BENCHMARK_TESTS,)):
            found.append(f"{module} imports benchmark code: {benchmarks}")
    return found


def outside_module_names() -> set[str]:
    """Names a file of tests/, tools/, benchmarks/ or harness/ could be imported by if put on sys.path."""
    return {p.stem for top in OUTSIDE for p in (ROOT / top).rglob("*.py") if p.stem != "__init__"}


@functools.cache
def repository_graph() -> dict[str, set[str]]:
    """The graph of every scanned folder, read once for the tests below (which copy it)."""
    return package_graph(sources_of(SCANNED))


def test_the_repository_keeps_the_import_contract():
    graph = repository_graph()
    for seen in (f"{PACKAGE}.core.rules.table", f"{PACKAGE}.doctor.probe", f"{HARNESS}.engine_run",
                 "benchmarks.speedup", "tools.validation_docs", "tests.gpu.test_lossless"):  # fmt: skip
        assert seen in graph, seen  # the walk saw them
    assert violations(graph, outside_module_names()) == []


def test_the_benchmark_tests_are_the_one_part_of_the_tests_that_imports_benchmarks():
    """Rule 6's exception is in use (else it should go), and by nothing else of the tests."""
    graph = package_graph(sources_of(("tests",)))
    importers = {m for m, imported in graph.items() if any(within(i, ("benchmarks",)) for i in imported)}
    assert importers and all(within(m, (BENCHMARK_TESTS,)) for m in importers), importers


def path_edits(source: str) -> list[int]:
    """Lines that change ``sys.path`` (a call of one of its methods that add or remove, or an
    assignment to it): imports resolve by package name, never by a path put first."""
    found = []
    for node in ast.walk(ast.parse(source)):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("insert", "append", "extend", "remove", "pop", "clear"):
                target = node.func.value
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t.value if isinstance(t, ast.Subscript) else t for t in targets), None)
        if target is not None and ast.unparse(target) == "sys.path":
            found.append(node.lineno)
    return found


def test_nothing_edits_sys_path():
    edits = {m: lines for m, (text, _) in sources_of(SCANNED).items() if (lines := path_edits(text))}
    assert edits == {}


@pytest.mark.parametrize(
    "line", ["sys.path.insert(0, str(folder))", "sys.path += ['x']", "sys.path[:0] = ['x']", "sys.path = []"]
)
def test_a_planted_sys_path_edit_is_found(line):
    assert path_edits("import sys\n\ndef f(folder):\n    " + line + "\n") == [4]
    assert path_edits("import sys\npath = list(sys.path)\nok = sys.path == path\n") == []


def test_a_server_reaches_the_glue_lazily_imported_by_the_hooks():
    """Rule 2 follows the imports inside functions: the model classes are imported by the
    architecture hook only when a launch asks for them, and still count."""
    seen = reach(package_graph(), SERVER_ENTRY)
    assert f"{PACKAGE}.patch.deepseek_models" in seen
    assert f"{PACKAGE}.patch.deepseek_capture" in seen


PLANTED = {
    "core imports torch": (
        f"{PACKAGE}.core.capture.ids",
        "import torch\n",
        "pure sglang_eagle3_embed.core.capture.ids",
    ),
    "core reaches sglang through another module": (
        f"{PACKAGE}.core.findings",
        "from sglang_eagle3_embed.patch import deepseek_capture\n",
        "pure sglang_eagle3_embed.core.findings imports ['sglang', 'torch']",
    ),
    "a hook imports the doctor lazily": (
        f"{PACKAGE}.patch.model_architecture",
        "def f():\n    from sglang_eagle3_embed.doctor import probe\n",
        "a server imports sglang_eagle3_embed.doctor.probe",
    ),
    "the doctor imports a test helper": (
        f"{PACKAGE}.doctor.pair",
        "from strategies import draft_config\n",
        "sglang_eagle3_embed.doctor.pair imports code from outside the package: ['strategies'",
    ),
    "the doctor imports the tests package": (
        f"{PACKAGE}.doctor.probe",
        "from tests.support import rule_examples\n",
        "imports code from outside the package: ['tests.support'",
    ),
    "the harness imports a test helper": (
        f"{HARNESS}.server_run",
        "def f():\n    from tests.support import ROOT\n",
        f"{HARNESS}.server_run (the harness) imports ['tests.support', 'tests.support.ROOT']",
    ),
    "the harness imports a benchmark": (
        f"{HARNESS}.engine_run",
        "from benchmarks import configs\n",
        f"{HARNESS}.engine_run (the harness) imports ['benchmarks', 'benchmarks.configs']",
    ),
    "a hook imports the harness lazily": (
        f"{PACKAGE}.patch.model_architecture",
        "def f():\n    from harness import engine_run\n",
        f"{PACKAGE}.patch.model_architecture imports code from outside the package: ['{HARNESS}'",
    ),
    "the core imports the harness": (
        f"{PACKAGE}.core.rules.table",
        "from harness import rule_examples\n",
        f"{PACKAGE}.core.rules.table imports code from outside the package: ['{HARNESS}', '{HARNESS}.rule_examples']",
    ),
    "the capture vocabulary imports a rule": (
        f"{CORE}.capture.draft_config",
        "def f():\n    from sglang_eagle3_embed.core.rules.table import RULES\n",
        f"{CORE}.capture.draft_config (core.capture) imports ['{CORE}.rules.table', '{CORE}.rules.table.RULES']",
    ),
    "the readers import the canary (relative import)": (
        f"{CORE}.readers.hub",
        "from ..canary import expectations\n",
        f"{CORE}.readers.hub (core.readers) imports ['{CORE}.canary', '{CORE}.canary.expectations']",
    ),
    "a shared module imports a subpackage": (
        f"{CORE}.errors",
        "from sglang_eagle3_embed.core.capture import ids\n",
        f"{CORE}.errors (core.shared) imports ['{CORE}.capture', '{CORE}.capture.ids']",
    ),
    "the doctor imports the harness": (
        f"{PACKAGE}.doctor.probe",
        "def f():\n    import harness.server_run\n",
        f"{PACKAGE}.doctor.probe imports code from outside the package: ['{HARNESS}.server_run']",
    ),
    "the command line imports the harness": (
        f"{PACKAGE}.cli",
        "from harness.rule_examples import EXAMPLES\n",
        f"{PACKAGE}.cli imports code from outside the package: ['{HARNESS}.rule_examples'",
    ),
    "the activation state imports the harness": (
        f"{PACKAGE}.activation",
        "from harness import environment\n",
        f"{PACKAGE}.activation imports code from outside the package: ['{HARNESS}'",
    ),
    "a benchmark imports the tests package": (
        "benchmarks.speedup",
        "from tests.support import ROOT\n",
        "benchmarks.speedup imports the tests package: ['tests.support'",
    ),
    "a tool imports a test module lazily": (
        "tools.validation_docs",
        "def f():\n    import tests.support.strategies\n",
        "tools.validation_docs imports the tests package: ['tests.support.strategies']",
    ),
    "an integration test imports a benchmark": (
        "tests.integration.gpu.test_serving_client",
        "from benchmarks.speedup import CONFIGS\n",
        "tests.integration.gpu.test_serving_client imports benchmark code: ['benchmarks.speedup'",
    ),
    "a GPU test imports a benchmark lazily": (
        "tests.gpu.test_load_faults",
        "def f():\n    from benchmarks import _common\n",
        "tests.gpu.test_load_faults imports benchmark code: ['benchmarks', 'benchmarks._common']",
    ),
}


@pytest.mark.parametrize("case", list(PLANTED))
def test_the_contract_catches_a_planted_import(case):
    module, line, expected = PLANTED[case]
    graph, outside_names = dict(repository_graph()), outside_module_names()
    assert not any(expected in v for v in violations(graph, outside_names))
    path = ROOT / (module.replace(".", "/") + ".py")
    is_package = not path.exists()
    text = (path.with_suffix("") / "__init__.py" if is_package else path).read_text()
    graph[module] = imports_of(text + "\n" + line, module, is_package)
    found = violations(graph, outside_names)
    assert any(expected in v for v in found), found
