"""The import contract that keeps the layout honest (CONTRIBUTING.md, "Layout").

Read from the source with ``ast``, so that imports inside functions (the lazy ones a server only
reaches on some paths) count as much as those at the top of a module:

1. the pure core (``sglang_eagle3_embed``, ``core``, ``activation``) imports neither torch nor
   sglang, directly or through another module of the package;
2. a server process, which loads ``sglang_eagle3_embed.plugin:register`` and whatever it pulls in,
   imports nothing of the wiring doctor or the command line;
3. the package (the doctor included) never imports test, tool or benchmark code.

``test_the_contract_catches_a_planted_import`` shows each rule failing on a planted violation.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = "sglang_eagle3_embed"
HEAVY = {"torch", "sglang", "transformers", "safetensors"}
PURE = (f"{PACKAGE}.core", f"{PACKAGE}.activation")  # and the package's own __init__
SERVER_ENTRY = f"{PACKAGE}.plugin"
NOT_IN_A_SERVER = (f"{PACKAGE}.doctor", f"{PACKAGE}.cli")
OUTSIDE = ("tests", "tools", "benchmarks")


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


def package_graph(sources: dict[str, tuple[str, bool]] | None = None) -> dict[str, set[str]]:
    """Module -> the modules it imports, for every module of the package."""
    if sources is None:
        sources = {
            module_name(p): (p.read_text(), p.name == "__init__.py") for p in (ROOT / PACKAGE).rglob("*.py")
        }
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


def violations(graph: dict[str, set[str]], outside_names: set[str]) -> list[str]:
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
            found.append(f"{module} imports test, tool or benchmark code: {bad}")
    return found


def outside_module_names() -> set[str]:
    """Names a file of tests/, tools/ or benchmarks/ could be imported by if put on sys.path."""
    return {p.stem for top in OUTSIDE for p in (ROOT / top).rglob("*.py") if p.stem != "__init__"}


def test_the_package_keeps_the_import_contract():
    graph = package_graph()
    assert f"{PACKAGE}.core.rules" in graph and f"{PACKAGE}.doctor.probe" in graph  # the walk saw them
    assert violations(graph, outside_module_names()) == []


def test_a_server_reaches_the_glue_lazily_imported_by_the_hooks():
    """Rule 2 follows the imports inside functions: the model classes are imported by the
    architecture hook only when a launch asks for them, and still count."""
    seen = reach(package_graph(), SERVER_ENTRY)
    assert f"{PACKAGE}.patch.deepseek_models" in seen
    assert f"{PACKAGE}.patch.deepseek_capture" in seen


PLANTED = {
    "core imports torch": (f"{PACKAGE}.core.ids", "import torch\n", "pure sglang_eagle3_embed.core.ids"),
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
        "sglang_eagle3_embed.doctor.pair imports test, tool or benchmark code: ['strategies'",
    ),
    "the doctor imports the tests package": (
        f"{PACKAGE}.doctor.probe",
        "from tests.support import rule_examples\n",
        "imports test, tool or benchmark code: ['tests.support'",
    ),
}


@pytest.mark.parametrize("case", list(PLANTED))
def test_the_contract_catches_a_planted_import(case):
    module, line, expected = PLANTED[case]
    sources = {
        module_name(p): (p.read_text(), p.name == "__init__.py") for p in (ROOT / PACKAGE).rglob("*.py")
    }
    text, is_package = sources[module]
    sources[module] = (text + "\n" + line, is_package)
    found = violations(package_graph(sources), outside_module_names())
    assert any(expected in v for v in found), found
