"""Dependencies point one way: shared_context <- engines.models <- engines <- router; indexer uses
shared_context and engines.models; the router (the application) may also call the indexer. Checked over every import statement (module level, inside functions and
under TYPE_CHECKING), so a lazy import cannot hide a wrong-way dependency or a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("shared_context", "engines", "router", "indexer", "tools", "testing")

# layer -> the layers it may import (besides itself)
ALLOWED = {
    "shared_context": set(),
    "engines.models": {"shared_context"},
    "engines": {"shared_context", "engines.models"},
    # the router is the application: its CLI's `index` command and the demo build indexes
    "router": {"shared_context", "engines.models", "engines", "indexer"},
    "indexer": {"shared_context", "engines.models"},
    # training tooling builds the product's data files from the outside: it may use every package, none uses it
    "tools": {"shared_context", "engines.models", "engines", "router", "indexer"},
    # the loopback model server of tests and benchmarks: the product never imports it
    "testing": {"shared_context", "engines.models", "engines", "router", "indexer"},
}


def _layer(module: str) -> str | None:
    if module == "engines.models" or module.startswith("engines.models."):
        return "engines.models"
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    """(line, imported module) of every import in the file; relative imports resolved."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # "from engines import usage" imports engines.usage: count the submodule when it is one
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                is_module = (REPO / sub.replace(".", "/")).with_suffix(".py").exists() or (
                    REPO / sub.replace(".", "/") / "__init__.py").exists()
                found.append((node.lineno, sub if is_module else base))
    return found


def _product_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in _product_files()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for _, m in _imports(path) if m in modules and m != name}
    return graph


# Known wrong-way imports being removed by another change; delete an entry when its import is gone.
def test_imports_point_one_way() -> None:
    wrong = []
    for path in _product_files():
        source = _layer(_module_name(path))
        assert source is not None
        for line, target in _imports(path):
            layer = _layer(target)
            if layer is not None and layer != source and layer not in ALLOWED[source]:
                wrong.append(f"{path.relative_to(REPO)}:{line} ({source}) imports {target} ({layer})")
    assert not wrong, "imports against the layering:\n" + "\n".join(dict.fromkeys(wrong))


def test_no_import_cycles_between_modules() -> None:
    """No module reaches itself through imports (package __init__ re-exports excluded: they only gather)."""
    graph = {m: {t for t in deps if not (REPO / t.replace(".", "/") / "__init__.py").exists()}
             for m, deps in _graph().items() if not (REPO / m.replace(".", "/") / "__init__.py").exists()}
    cycles: list[str] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycles.append(" -> ".join([*stack[stack.index(t):], t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _exists(module: str) -> bool:
    path = REPO / module.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_every_imported_project_module_exists() -> None:
    """An import of a module the project no longer has fails here, also a lazy one: mypy's
    `ignore_missing_imports` does not report it, and a function's import only fails when the function runs."""
    files = [*_product_files(), *sorted((REPO / "tests").rglob("*.py")), *sorted((REPO / "benchmarks").rglob("*.py"))]
    missing = [f"{path.relative_to(REPO)}:{line} imports {target}" for path in files
               for line, target in _imports(path) if _layer(target) is not None and not _exists(target)]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_the_checker_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """The checker itself: an import inside a function, and a relative one, are both seen."""
    fake = REPO / "engines" / "models" / "_layering_probe.py"
    text = "def f():\n    from engines.base import BaseEngine\n    from .. import local\n    return BaseEngine, local\n"
    found = _imports(fake, text)
    assert (2, "engines.base") in found and (3, "engines.local") in found
    assert {_layer(m) for _, m in found} == {"engines"}  # both against the rules for engines.models


def test_training_tooling_is_not_shipped() -> None:
    """The wheel's package list (pyproject's find rules) holds no `tools` package: training code stays out."""
    import tomllib

    from setuptools import find_packages

    rules = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]["find"]
    shipped = find_packages(str(REPO), include=rules["include"], exclude=rules.get("exclude", ()))
    assert "router" in shipped and "tools.routing" not in shipped
    assert not [p for p in shipped if p.split(".")[0] == "tools"]
