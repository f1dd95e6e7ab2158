"""spec 7.1: the queue core never imports the workflow engine.

Two checks: importing ``tenure`` and every core module in a fresh interpreter leaves
``tenure.flow`` out of ``sys.modules``; and no import statement anywhere in a core module (lazy
ones inside functions included) names ``tenure.flow``. Front doors that present runs (the CLI, a
dashboard, integrations) may import it, lazily."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import tenure

PKG = Path(tenure.__file__).resolve().parent
#: Front doors, not core: they may show workflow runs (``tenure runs show``) and import tenure.flow.
FRONT_DOORS = ("tenure.flow", "tenure.cli", "tenure.web", "tenure.dashboard", "tenure.contrib",
               "tenure.integrations", "tenure.django", "tenure.testing", "tenure.__main__")
#: Must import cleanly; anything else found by the walk is tried and skipped if an optional
#: dependency is missing.
REQUIRED = ("tenure", "tenure.store", "tenure.jobs", "tenure.worker", "tenure.records", "tenure.errors",
            "tenure.engine", "tenure.engine.sqlite", "tenure.app", "tenure.worker.handler_tx")


def core_modules() -> list[str]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if not any(name == f or name.startswith(f + ".") for f in FRONT_DOORS):
            out.append(name)
    return out


def test_core_modules_exist_and_exclude_flow():
    mods = core_modules()
    assert set(REQUIRED) <= set(mods)
    assert not [m for m in mods if m.startswith("tenure.flow")]


def test_importing_the_core_leaves_tenure_flow_out_of_sys_modules():
    script = f"""
import importlib, json, sys
required = {list(REQUIRED)!r}
skipped = []
for name in {core_modules()!r}:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        if name in required:
            raise
        skipped.append(name)
print(json.dumps({{"flow": sorted(m for m in sys.modules if m == "tenure.flow" or m.startswith("tenure.flow.")),
                  "loaded": sorted(m for m in sys.modules if m.startswith("tenure")), "skipped": skipped}}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["flow"] == [], f"the core imported {got['flow']}"
    assert set(REQUIRED) <= set(got["loaded"])


def _imports(tree: ast.AST, module: str) -> list[str]:
    """Every module an import statement in ``tree`` names, resolved against ``module``."""
    package = module if module == "tenure" or (PKG / Path(*module.split(".")[1:]) / "__init__.py").exists() \
        else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append(target)
            out += [f"{target}.{a.name}" for a in node.names]
    return out


def test_no_core_module_names_tenure_flow_in_any_import():
    offenders = {}
    for module in core_modules():
        parts = module.split(".")[1:]
        path = PKG.joinpath(*parts, "__init__.py") if (PKG.joinpath(*parts)).is_dir() else \
            PKG.joinpath(*parts[:-1], parts[-1] + ".py") if parts else PKG / "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        bad = [t for t in _imports(tree, module) if t == "tenure.flow" or t.startswith("tenure.flow.")]
        if bad:
            offenders[module] = bad
    assert offenders == {}


def test_the_import_walk_would_see_a_flow_import():
    # The check above must be able to fail: a relative lazy import inside a function is resolved.
    tree = ast.parse("def f():\n    from .flow import Runner\n")
    assert "tenure.flow" in _imports(tree, "tenure.jobs")
    tree = ast.parse("def f():\n    from ...flow.runs import describe_run\n")
    assert "tenure.flow.runs" in _imports(tree, "tenure.engine.sqlite.engine")
    assert "tenure.flow.runs" in _imports(tree, "tenure.engine.sqlite")  # from a package's __init__ too
    tree = ast.parse("import tenure.flow as f\n")
    assert "tenure.flow" in _imports(tree, "tenure.store")
