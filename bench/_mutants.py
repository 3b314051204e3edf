"""Single-point mutants of a Python module, made on its syntax tree (`python -m bench mutation`).

Operators: flip a comparison at its boundary (< ↔ <=, > ↔ >=, == ↔ !=, in ↔ not in, is ↔ is
not), change a numeric constant (n → n + 1) or a boolean (True ↔ False), swap an arithmetic or
boolean operator (+ ↔ −, * ↔ /, ** → *, // → /, % → //, and ↔ or), drop a unary − or `not`,
return None instead of a value, and drop a simple statement (replaced by `pass`). Docstrings,
imports, type annotations, decorators, module-level statements other than constants and
class-level fields are left alone.

A mutant is named by module, line, operator and its original and replacement text (plus an
occurrence number when one line has the same mutation twice), never by its position in a list,
so the reviewed list of equivalent mutants stays valid when other code moves.
"""

import ast
import copy
from dataclasses import dataclass

COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
BINARY = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.Pow: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
BOOLEAN = {ast.And: ast.Or, ast.Or: ast.And}
DROPPABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.Raise, ast.Continue, ast.Break)


@dataclass(frozen=True)
class Mutant:
    module: str  # path relative to the repository
    line: int
    operator: str  # compare, number, boolean-constant, binary, bool-op, unary, return-none, drop
    original: str
    replacement: str
    occurrence: int  # 1 unless the same line has the same mutation more than once
    node_index: int  # position of the mutated node in ast.walk order (not part of the name)
    detail: int = 0  # which operator of a chained comparison

    @property
    def key(self) -> str:
        suffix = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return (
            f"{self.module}:{self.line}:{self.operator}: "
            f"{self.original} -> {self.replacement}{suffix}"
        )


def _short(text: str, size: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"


def _skipped_nodes(tree: ast.Module) -> set[int]:
    """ids of nodes never mutated: docstrings, annotations, decorators, imports, and the
    module's and classes' own statements (constants, fields), bar their numeric constants."""
    skipped: set[int] = set()

    def skip(node):
        if node is not None:
            skipped.update(id(child) for child in ast.walk(node))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and _is_docstring(body[0]):
            skip(body[0])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                skip(arg.annotation)
            skip(node.returns)
            for decorator in node.decorator_list:
                skip(decorator)
        elif isinstance(node, ast.ClassDef):
            for decorator in node.decorator_list:
                skip(decorator)
        elif isinstance(node, ast.AnnAssign):
            skip(node.annotation)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            skip(node)
    return skipped


def _is_docstring(statement) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _top_level_statements(tree: ast.Module) -> set[int]:
    """ids of statements directly in the module or a class body (never dropped)."""
    found = {id(s) for s in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found.update(id(s) for s in node.body)
    return found


def _sites(node, top_level: set[int]):
    """(operator, detail, mutate(node) → None) for each mutation of this node."""
    if isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            if type(op) in COMPARE:
                yield "compare", k, lambda n, k=k: n.ops.__setitem__(k, COMPARE[type(n.ops[k])]())
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield "number", 0, lambda n: setattr(n, "value", n.value + 1)
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield "boolean-constant", 0, lambda n: setattr(n, "value", not n.value)
    elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in BINARY:
        yield "binary", 0, lambda n: setattr(n, "op", BINARY[type(n.op)]())
    elif isinstance(node, ast.BoolOp):
        yield "bool-op", 0, lambda n: setattr(n, "op", BOOLEAN[type(n.op)]())
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.Not):
        yield "unary", 0, lambda n: n.operand
    returns_none = isinstance(node, ast.Return) and (
        node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)
    )
    if isinstance(node, ast.Return) and not returns_none:
        yield "return-none", 0, lambda n: setattr(n, "value", ast.Constant(None))
    if isinstance(node, DROPPABLE) and id(node) not in top_level and not _is_docstring(node):
        yield "drop", 0, lambda n: ast.Pass()


def _text(node, source: str, replaced=None) -> str:
    """A node's original source (or its unparsed replacement), on one line."""
    if replaced is not None:
        return _short(ast.unparse(replaced))
    return _short(ast.get_source_segment(source, node) or ast.unparse(node))


def mutants(module: str, source: str) -> list[Mutant]:
    tree = ast.parse(source)
    skipped = _skipped_nodes(tree)
    top_level = _top_level_statements(tree)
    found: list[Mutant] = []
    seen: dict[tuple, int] = {}
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skipped:
            continue
        for operator, detail, mutate in _sites(node, top_level):
            if id(node) in top_level and operator != "number":
                continue
            twin = copy.deepcopy(node)
            replacement = _text(twin, source, replaced=mutate(twin) or twin)
            original = _text(node, source)
            if isinstance(node, ast.AugAssign | ast.Compare | ast.BinOp):
                original = _short(ast.unparse(node))
            name = (node.lineno, operator, original, replacement)
            seen[name] = seen.get(name, 0) + 1
            found.append(
                Mutant(
                    module, node.lineno, operator, original, replacement, seen[name], index, detail
                )
            )
    return found


def mutated_source(source: str, mutant: Mutant) -> str:
    """The module's source with this one mutation applied (unparsed from the tree)."""
    tree = ast.parse(source)
    top_level = _top_level_statements(tree)
    nodes = list(ast.walk(tree))
    node = nodes[mutant.node_index]
    for operator, detail, mutate in _sites(node, top_level):
        if operator == mutant.operator and detail == mutant.detail:
            new = mutate(node)
            if new is not None:
                _replace_child(tree, node, new)
            return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    raise ValueError(f"no such mutation: {mutant.key}")


def _replace_child(tree: ast.Module, old, new) -> None:
    """Put `new` where `old` is in the tree (a field or an item of a list field)."""
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[[id(item) for item in value].index(id(old))] = new
                return
    raise ValueError("node not found")
