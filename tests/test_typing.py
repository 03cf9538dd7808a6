"""Types hold at the seams: `mypy --strict` passes on the four product packages, the files a question crosses
between the router and the engines have no `Any` in their signatures, and the rest may not gain more."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEAMS = ("router/router.py", "router/classifier.py", "engines/base.py", "engines/local.py",
         "engines/global_search.py", "engines/drift.py")
QUERY_PACKAGES = ("shared_context", "engines", "router")
# Functions of the three query packages whose signatures use `Any` (all in shared_context: the local context's
# row readers and builder options, and `re`'s own `findall`/`split` results). The count may go down, never up:
# lower it when a change types more.
MAX_ANY_FUNCTIONS = 21


def _mentions_any(annotation: ast.expr) -> bool:
    """`Any` as a name in the annotation (`typing.Any` too; a string annotation is parsed), not a longer name
    that contains the word."""
    for node in ast.walk(annotation):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                if _mentions_any(ast.parse(node.value, mode="eval").body):
                    return True
            except SyntaxError:
                continue
        if (isinstance(node, ast.Name) and node.id == "Any") or (isinstance(node, ast.Attribute) and node.attr == "Any"):
            return True
    return False


def any_functions(path: Path) -> list[str]:
    """`file:line:name` of each function whose parameters or return annotation mention `Any`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = node.args
        annotations = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        annotations += [args.vararg.annotation if args.vararg else None,
                        args.kwarg.annotation if args.kwarg else None, node.returns]
        if any(a is not None and _mentions_any(a) for a in annotations):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}:{node.name}")
    return found


def test_seam_files_have_no_any_in_their_signatures() -> None:
    assert [f for seam in SEAMS for f in any_functions(ROOT / seam)] == []


def test_engines_and_router_have_no_any_in_their_signatures() -> None:
    found = [f for pkg in ("engines", "router") for path in sorted((ROOT / pkg).rglob("*.py"))
             for f in any_functions(path)]
    assert found == []


def test_functions_typed_with_any_do_not_grow() -> None:
    found = [f for pkg in QUERY_PACKAGES for path in sorted((ROOT / pkg).rglob("*.py")) for f in any_functions(path)]
    assert len(found) <= MAX_ANY_FUNCTIONS, f"{len(found)} functions use Any (at most {MAX_ANY_FUNCTIONS})"


def test_mypy_strict_on_the_product_packages() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "-p", "shared_context", "-p", "engines", "-p", "router",
         "-p", "indexer"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:]


def test_the_count_sees_any_by_name_only() -> None:
    fn = ast.parse("def f(a: 'list[Any]', b: AnySection, c: typing.Any) -> int: ...").body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert [_mentions_any(a.annotation) for a in fn.args.args if a.annotation] == [True, False, True]
