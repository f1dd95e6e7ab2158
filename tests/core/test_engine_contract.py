"""The engine contract is declared in one place and kept (docs/architecture.md, "The layers").

- Every session method a dialect offers is declared on :class:`tenure.engine.base.Session` (itself
  or the two halves it is made of, ``engine/job_contract.py`` and ``engine/admin_contract.py``,
  each name once), and both dialects implement every declared one with the same parameters (names, kinds, defaults).
- Code above ``engine/`` calls only declared session methods and touches no private member of a
  session.
- Code above ``engine/`` reads what a session answers by field name, never by position: no integer
  index or slice of a row, no unpacking of a row into names (rows are the named records of
  ``engine/rows.py``; a list of rows may still be indexed, ``rows[-1]`` is a row).

The last two walk the source (``ast``). A value is followed through one function: the answer of a
call to a session method, the names assigned from it, the loop and comprehension variables over
it, and the parameters annotated with a row record (or a collection of them). The Session's own
return annotations tell a row from a collection of rows.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from tenure.engine import rows as engine_rows
from tenure.engine.admin_contract import AdminContract
from tenure.engine.base import Session
from tenure.engine.job_contract import JobContract
from tenure.engine.postgres.session import PostgresSession
from tenure.engine.sqlite.session import SQLiteSession

SRC = Path(__file__).resolve().parents[2] / "src" / "tenure"
ROW, MANY = "row", "many"
#: Session members whose answer is not a row: the application's own cursor and driver connection.
NOT_ROWS = {"execute", "connection"}
#: Places that may read a session answer by position, with the reason. Keep it small.
ALLOWED: dict[tuple[str, str], str] = {}
#: The classes that declare the contract: Session and the halves it is made of.
CONTRACT: tuple[type, ...] = tuple(k for k in Session.__mro__ if k.__module__.startswith("tenure.engine."))


def _members() -> dict[str, object]:
    """Every public member declared by a class of :data:`CONTRACT` (methods, properties, and
    annotated or assigned attributes), by name."""
    out: dict[str, object] = {}
    for klass in CONTRACT:
        for name, member in [*vars(klass).items(), *((n, None) for n in vars(klass).get("__annotations__", {}))]:
            if not name.startswith("_"):
                out.setdefault(name, member)
    return out


def _declared() -> dict[str, str]:
    """Every public member of Session, and what its answer is: a row, many rows, or neither ("")."""
    out: dict[str, str] = {}
    for name, member in _members().items():
        kind = ""
        if callable(member) and name not in NOT_ROWS:
            ret = str(inspect.signature(member).return_annotation)
            if re.match(r"(list|dict|set)\[", ret):
                kind = MANY
            elif re.search(r"\b(R\.\w+|JobRow|tuple)\b", ret):
                kind = ROW
        out[name] = kind
    return out


DECLARED = _declared()
ROW_TYPES = {name for name, obj in vars(engine_rows).items()
             if isinstance(obj, type) and issubclass(obj, tuple) and hasattr(obj, "_fields")}


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith("engine/"):
            yield rel, ast.parse(path.read_text(), rel)


def _annotation_kind(node: ast.expr | None) -> str:
    if node is None:
        return ""
    text = ast.unparse(node)
    names = set(re.findall(r"\w+", text))
    if not names & ROW_TYPES:
        return ""
    return MANY if re.match(r"(builtins\.)?(list|dict|set|Sequence|Iterable|Mapping)\[", text) else ROW


class _Reads(ast.NodeVisitor):
    """The positional reads of session answers in one function (or module) body."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.kinds: dict[str, str] = {}
        self.found: list[tuple[str, int, str]] = []

    def kind(self, node: ast.expr) -> str:
        if isinstance(node, ast.Name):
            return self.kinds.get(node.id, "")
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute):
                if f.attr in DECLARED and DECLARED[f.attr]:
                    return DECLARED[f.attr]
                if f.attr in ("values", "copy") and self.kind(f.value) == MANY:
                    return MANY
                if f.attr in ("get", "pop") and self.kind(f.value) == MANY:
                    return ROW
            if isinstance(f, ast.Name) and f.id in ("list", "sorted", "reversed", "tuple") and node.args:
                return MANY if self.kind(node.args[0]) == MANY else ""
            return ""
        if isinstance(node, ast.Subscript) and self.kind(node.value) == MANY:
            return ROW
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            self.comprehension(node.generators)
            return MANY if self.kind(node.elt) == ROW else ""
        if isinstance(node, ast.DictComp):
            self.comprehension(node.generators)
            return MANY if self.kind(node.value) == ROW else ""
        if isinstance(node, ast.IfExp):
            return self.kind(node.body) or self.kind(node.orelse)
        if isinstance(node, ast.BoolOp):
            return next((k for k in map(self.kind, node.values) if k), "")
        return ""

    def flag(self, node: ast.AST, what: str) -> None:
        text = ast.unparse(node)
        if (self.rel, text) not in ALLOWED:
            self.found.append((self.rel, node.lineno, f"{what}: {text}"))

    def bind(self, target: ast.expr, kind: str, source: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if kind:
                self.kinds[target.id] = kind
            else:
                self.kinds.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if kind == ROW:
                self.flag(source, "a row unpacked by position")
            for elt in target.elts:
                self.bind(elt.value if isinstance(elt, ast.Starred) else elt, "", source)

    def comprehension(self, generators: list[ast.comprehension]) -> None:
        for gen in generators:
            self.bind(gen.target, ROW if self.kind(gen.iter) == MANY else "", gen.iter)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        inner = _Reads(self.rel)
        inner.kinds = dict(self.kinds)
        args = node.args
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            kind = _annotation_kind(a.annotation)
            if kind:
                inner.kinds[a.arg] = kind
            else:
                inner.kinds.pop(a.arg, None)
        for stmt in node.body:
            inner.visit(stmt)
        self.found.extend(inner.found)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.body)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        kind = self.kind(node.value)
        for target in node.targets:
            self.bind(target, kind, node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.bind(node.target, self.kind(node.value) or _annotation_kind(node.annotation), node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.bind(node.target, self.kind(node.value), node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self.bind(node.target, ROW if self.kind(node.iter) == MANY else "", node)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    visit_AsyncFor = visit_For  # type: ignore[assignment]

    def visit_comprehension_node(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        self.comprehension(node.generators)
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_comprehension_node

    def visit_Starred(self, node: ast.Starred) -> None:
        if self.kind(node.value) == ROW:
            self.flag(node, "a row spread by position")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        index = node.slice
        if self.kind(node.value) == ROW:
            if isinstance(index, ast.Slice):
                self.flag(node, "a row sliced by position")
            elif isinstance(index, ast.UnaryOp) and isinstance(index.operand, ast.Constant):
                self.flag(node, "a row read by position")
            elif isinstance(index, ast.Constant) and isinstance(index.value, int):
                self.flag(node, "a row read by position")
            elif isinstance(index, ast.Name) and index.id.isupper():
                self.flag(node, "a row read by a position constant")
        self.generic_visit(node)


def positional_reads() -> list[tuple[str, int, str]]:
    found: list[tuple[str, int, str]] = []
    for rel, tree in _sources():
        reads = _Reads(rel)
        reads.visit(tree)
        found.extend(reads.found)
    return found


def test_the_walk_sees_a_positional_read() -> None:
    """The walk itself: each shape of positional read it must catch, and the legit ones it must not."""
    src = '''
def f(store, queue_name):
    with store._session() as s:
        row = s.job_get("a")
        rows = s.job_page(state=None, kind=None, queue=None, after=None, limit=5)
        first = rows[0]
        registry = s.queue_defaults([queue_name])
    a = row[3]
    b = [r[0] for r in rows]
    c, d = s.signal_insert("k", None, 0)
    e = first[-1]
    for q in registry.values():
        g = q[1]
    ok = (rows[-1].id, divmod(7, 2)[0], row.state)
def h(r: JobRow) -> None:
    return r[TOKEN_INDEX]
def k(s):
    return health(*s.jobs_table_stats()), print(*s.queue_list())
'''
    reads = _Reads("example.py")
    reads.visit(ast.parse(src))
    lines = sorted(line for _, line, _ in reads.found)
    assert lines == [8, 9, 10, 11, 13, 16, 18], reads.found


def test_no_positional_read_of_a_session_answer_above_the_engine() -> None:
    found = positional_reads()
    assert not found, "read these by field name (tenure.engine.rows):\n" + "\n".join(
        f"  src/tenure/{rel}:{line}: {what}" for rel, line, what in found)


def test_the_contract_is_session_and_its_two_halves_each_name_declared_once() -> None:
    """The split declaration is read whole: Session is made of exactly these halves, no half
    declares a name another already does (one would shadow the other), and every public name a
    Session offers is declared by one of them."""
    assert set(CONTRACT) == {Session, JobContract, AdminContract}, CONTRACT
    owners: dict[str, list[str]] = {}
    for klass in CONTRACT:
        names = {*vars(klass), *vars(klass).get("__annotations__", {})}
        for name in names:
            if not name.startswith("_"):
                owners.setdefault(name, []).append(klass.__name__)
    twice = {name: where for name, where in owners.items() if len(where) > 1}
    assert not twice, f"declared in more than one place: {twice}"
    assert {name for name in dir(Session) if not name.startswith("_")} <= set(DECLARED)
    assert len(DECLARED) > 80, "the declaration read too few names to be the whole contract"


def test_both_dialects_implement_every_declared_method_with_its_parameters() -> None:
    declared = set(DECLARED)
    for dialect in (SQLiteSession, PostgresSession):
        offered = {name for name in dir(dialect) if not name.startswith("_")}
        assert offered - declared == set(), f"{dialect.__name__} offers undeclared methods"
        assert not getattr(dialect, "__abstractmethods__", None), dialect.__abstractmethods__
        for name in sorted(declared):
            own = getattr(dialect, name)
            base = getattr(Session, name, None)
            if not inspect.isfunction(base):
                continue
            want = [(p.name, p.kind, p.default) for p in inspect.signature(base).parameters.values()]
            got = [(p.name, p.kind, p.default) for p in inspect.signature(own).parameters.values()]
            assert got == want, f"{dialect.__name__}.{name}{inspect.signature(own)} != Session.{name}"


class _Use(NamedTuple):
    rel: str
    line: int
    text: str


def _session_uses() -> Iterator[_Use]:
    """Each attribute read on a session object above the engine: a name bound by ``with
    ...session(...) as s`` (or a transaction, or an adopted connection) or a parameter annotated
    ``Session``."""
    openers = re.compile(r"^(_?session|_transaction_session|_atomic_session|_scoped_session|_classified|adopt)$")
    for rel, tree in _sources():
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            names = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]
                     if a.annotation is not None and re.search(r"\bSession\b", ast.unparse(a.annotation))}
            for node in ast.walk(fn):
                if isinstance(node, (ast.With, ast.AsyncWith)):
                    for item in node.items:
                        call = item.context_expr
                        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                                openers.search(call.func.attr) and isinstance(item.optional_vars, ast.Name):
                            names.add(item.optional_vars.id)
            for node in ast.walk(fn):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
                    yield _Use(rel, node.lineno, f"{node.value.id}.{node.attr}")


def test_code_above_the_engine_calls_only_declared_session_methods() -> None:
    uses = list(_session_uses())
    assert len(uses) > 100, "the walk found too few session calls to be looking at the right thing"
    undeclared = [u for u in uses if u.text.split(".", 1)[1] not in DECLARED]
    assert not undeclared, "declare these on the Session contract, engine/job_contract.py or engine/admin_contract.py (or call a declared one):\n" + "\n".join(
        f"  src/tenure/{u.rel}:{u.line}: {u.text}" for u in undeclared)


def test_a_job_rows_fields_are_the_job_records_in_order() -> None:
    """job_rows builds a Job positionally from a JobRow's fields (its fast builder): the row's first
    fields must be the record's, in the record's order, then the token and the claim's flag."""
    import dataclasses

    from tenure.records import Job

    job_fields = tuple(f.name for f in dataclasses.fields(Job))
    assert engine_rows.JobRow._fields == (*job_fields, "lease_token", "reclaimed")


def test_no_session_method_is_written_twice_the_same() -> None:
    """A session method whose code is identical in both dialects lives once, in engine/common.py
    or engine/insights.py, with each dialect supplying its statements."""
    import textwrap

    def code(fn: object) -> str:
        return ast.dump(ast.parse(textwrap.dedent(inspect.getsource(fn))))  # type: ignore[arg-type]

    twice = []
    for name in sorted(n for n in dir(SQLiteSession) if not n.startswith("__")):
        one, other = getattr(SQLiteSession, name, None), getattr(PostgresSession, name, None)
        if inspect.isfunction(one) and inspect.isfunction(other) and one is not other and code(one) == code(other):
            twice.append(name)
    assert not twice, f"the same code in both dialects: {twice}"
