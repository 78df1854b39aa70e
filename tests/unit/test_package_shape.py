"""The package's shape: no import cycle, counting the imports inside functions too (an
import moved into a function to dodge a cycle still ties the two modules together), and
small modules (at most ``MODULE_LINES`` lines each). The benchmarks' shape: the same limits,
functions of at most ``MAX_FUNCTION_LINES`` lines, entry points that import only bench/lib,
and bench/README.md's table naming every entry point."""

from __future__ import annotations

import ast
import re
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


def too_many_parameters(paths: list[Path]) -> dict[str, int]:
    """Every function of ``paths`` with more than ``MAX_PARAMETERS``, with its count."""
    over = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                count = len([n for n in names if n not in ("self", "cls")])
                if count > MAX_PARAMETERS:
                    over[f"{path.relative_to(ROOT)}:{node.name}"] = count
    return over


def test_no_function_takes_more_than_seven_parameters():
    """Settings travel as one object (``DecodeSettings``, ``DecodingRuntime``, ``TrainSettings``,
    ``RunFolder``), not one parameter each through every call."""
    assert too_many_parameters(sorted(PACKAGE.rglob("*.py"))) == {}


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


# -- the benchmarks: bench/lib holds what they share, each entry point (a module outside
# bench/lib with a ``main``, run as ``python -m bench.NAME``) imports only it, never another.
BENCH = ROOT / "bench"
BENCH_LIB = BENCH / "lib"
MAX_FUNCTION_LINES = 80


def bench_modules() -> list[Path]:
    return sorted(BENCH.rglob("*.py"))


def bench_module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_entry_point(path: Path) -> bool:
    """A bench module outside bench/lib that defines ``main`` at its top level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defines_main = any(
        isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body
    )
    return defines_main and BENCH_LIB not in path.parents


def entry_points() -> dict[str, Path]:
    return {bench_module_name(p): p for p in bench_modules() if is_entry_point(p)}


def bench_imports(path: Path) -> set[str]:
    """The ``bench`` modules and packages ``path`` imports, anywhere in it
    (``from bench import x`` names ``bench.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}:{node.lineno}: a relative import"
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "bench" or name.startswith("bench.")}


def long_functions(paths: list[Path], limit: int) -> dict[str, int]:
    """Every function of ``paths`` longer than ``limit`` lines, with its length."""
    over = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    over[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    return over


def test_no_benchmark_module_is_over_the_line_limit():
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in bench_modules()
    }
    assert {name: n for name, n in sizes.items() if n > MODULE_LINES} == {}
    assert max(sizes.values()) > MODULE_LINES // 2  # the files were read


def test_no_benchmark_function_is_over_80_lines():
    """A bench's ``main`` reads as: parse the arguments, measure, write the result; what it
    measures lives in functions of their own, or in bench/lib."""
    assert long_functions(bench_modules(), MAX_FUNCTION_LINES) == {}
    assert long_functions(bench_modules(), MAX_FUNCTION_LINES // 2)  # the functions were read


def test_no_benchmark_function_takes_more_than_seven_parameters():
    assert too_many_parameters(bench_modules()) == {}


def test_the_benchmarks_have_entry_points_and_a_library():
    names = entry_points()
    assert "bench.bench_train" in names and "bench.gpu.probe_cudagraphs" in names
    assert not any(name.startswith("bench.lib") for name in names)


def test_no_entry_point_imports_another_entry_point():
    """An entry point imports what it shares from bench/lib, never from another bench."""
    names = entry_points()
    found = {
        name: sorted(imported & names.keys())
        for name, path in names.items()
        if (imported := bench_imports(path)) & names.keys()
    }
    assert found == {}
    beyond_lib = {
        name: sorted(i for i in bench_imports(path) if not i.startswith("bench.lib"))
        for name, path in names.items()
    }
    assert {name: imported for name, imported in beyond_lib.items() if imported} == {}


def test_bench_lib_imports_no_entry_point():
    """bench/lib imports only itself among the benches: no entry point, nothing beside it."""
    names = entry_points().keys()
    lib = sorted(BENCH_LIB.rglob("*.py"))
    assert {
        bench_module_name(p): sorted(bench_imports(p) & names)
        for p in lib
        if bench_imports(p) & names
    } == {}
    found = {
        bench_module_name(path): sorted(imported)
        for path in lib
        if (imported := {i for i in bench_imports(path) if not i.startswith("bench.lib")})
    }
    assert found == {}


def bench_readme_modules() -> list[str]:
    """The first column of bench/README.md's table of benches (the one headed ``module``)."""
    names, in_table = [], False
    for line in (BENCH / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| module |"):
            in_table = True
        elif in_table and not line.startswith("|"):
            break
        elif in_table and (cell := re.match(r"\| `([\w.]+)` \|", line)):
            names.append(cell.group(1))
    return names


def test_the_bench_readme_table_names_every_entry_point():
    """Each entry point has its row (``gpu.NAME`` for bench/gpu/), each row an entry point."""
    table = bench_readme_modules()
    assert len(table) == len(set(table)), "a module named twice"
    assert sorted(f"bench.{name}" for name in table) == sorted(entry_points())
