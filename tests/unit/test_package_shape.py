"""The package's shape: no import cycle, counting the imports inside functions too (an
import moved into a function to dodge a cycle still ties the two modules together), and
small modules (at most ``MODULE_LINES`` lines each)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "transformer_core"
MODULE_LINES = 450


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports, anywhere in it. The package imports by
    absolute names only (a relative import fails here, so that none goes unseen)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}:{node.lineno}: a relative import"
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    edges = {module_name(p): imports(p, modules) for p in paths}
    # Importing a.b runs a's __init__ first, but that is no dependency of a on a.b.
    return {
        m: {d for d in deps if d != m and not m.startswith(d + ".")} for m, deps in edges.items()
    }


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``edges`` as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_imports_inside_functions():
    edges = graph()
    # commands import their library modules inside run(), so --help stays fast
    assert "transformer_core.decoding.translate" in edges["transformer_core.commands.translate"]


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_is_over_the_line_limit():
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > MODULE_LINES} == {}
    assert max(sizes.values()) > MODULE_LINES // 2  # the files were read


MAX_PARAMETERS = 7  # self and cls not counted


def test_no_function_takes_more_than_seven_parameters():
    """Settings travel as one object (``DecodeSettings``, ``DecodingRuntime``, ``TrainSettings``,
    ``RunFolder``), not one parameter each through every call."""
    over = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                count = len([n for n in names if n not in ("self", "cls")])
                if count > MAX_PARAMETERS:
                    over[f"{path.relative_to(PACKAGE)}:{node.name}"] = count
    assert over == {}


# The package's groups from the top down (docs/architecture.md, "The package"): a module
# imports only from its own group or from groups further down this list.
LAYERS = (
    "commands", "cli", "workflow_plan", "training", "tables", "figures", "export", "evaluation",
    "decoding", "device", "data", "model", "settings", "parsing", "paper", "files", "errors",
)  # fmt: skip
TOP_LEVEL_MODULES = 10


def group(module: str) -> str | None:
    """The group of ``transformer_core.X[.Y]`` (X), None for the package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] not in ("__init__", "__main__") else None


def test_groups_import_only_downwards():
    upwards = [
        (module, dep)
        for module, deps in graph().items()
        for dep in deps
        if group(module) and group(dep) and group(dep) != group(module)
        and LAYERS.index(group(dep)) < LAYERS.index(group(module))
    ]  # fmt: skip
    assert upwards == []
    assert {group(m) for m in graph()} - {None} == set(LAYERS)  # every group has its place


def test_few_modules_stand_at_the_top_level():
    top = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= TOP_LEVEL_MODULES, sorted(top)


def test_no_benchmark_script_is_over_the_line_limit():
    sizes = {
        p.name: len(p.read_text(encoding="utf-8").splitlines())
        for p in (ROOT / "bench").glob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > MODULE_LINES} == {}
