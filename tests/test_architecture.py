"""The size limits of issue 13, checked on the code itself so that they stay kept.

A newcomer reads a module in one sitting and a function on one screen: no module over 600 lines,
no function over 60, no view over 40 (views only translate HTTP into service calls). Migrations
and tests are exempt. The packages' `__init__` modules stay free of Celery so that importing a
package (notably the pure statistics in `h2htalk.stats`) never needs a broker or settings.
"""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("h2htalk", "scenarios", "annotation", "scoring", "bench")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_VIEW_LINES = 40


def _sources():
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "migrations" not in path.relative_to(REPO).parts:
                yield path


def _is_views_module(path: Path) -> bool:
    return path.name == "views.py" or path.name.endswith("_views.py")


def _size_offences(path: Path) -> list[str]:
    text = path.read_text("utf-8")
    where = path.relative_to(REPO)
    offences = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        offences.append(f"{where}: module of {lines} lines (limit {MAX_MODULE_LINES})")
    limit = MAX_VIEW_LINES if _is_views_module(path) else MAX_FUNCTION_LINES
    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                offences.append(
                    f"{where}:{node.lineno} {node.name}: {length} lines (limit {limit})"
                )
    return offences


def test_no_module_or_function_over_the_size_limits():
    offences = [offence for path in _sources() for offence in _size_offences(path)]
    for offence in offences:
        print(offence)
    assert not offences, "\n".join(offences)


def _imported_modules(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.append(base)
            names.extend(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_package_inits_do_not_import_celery():
    offenders = []
    for package_init in (path for path in _sources() if path.name == "__init__.py"):
        tree = ast.parse(package_init.read_text("utf-8"))
        for name in _imported_modules(tree):
            if "celery" in name.lower():
                offenders.append(f"{package_init.relative_to(REPO)} imports {name}")
    for offender in offenders:
        print(offender)
    assert not offenders
