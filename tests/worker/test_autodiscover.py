"""Task autodiscovery outside Django: ``App(include=[...])`` imports the modules that
declare the app's tasks before any worker of the app starts; ``autodiscover`` refuses a module
that does not exist by name (TN1001)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tenure.errors import InvalidArgument, InvalidType


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A package whose app module names its tasks module in ``include`` (and does not import it)."""
    pkg = tmp_path / "inclproj"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "app.py").write_text(textwrap.dedent(f"""
        import tenure
        app = tenure.App("sqlite:///{tmp_path}/incl.db", include=["inclproj.tasks"])
    """))
    (pkg / "tasks.py").write_text(textwrap.dedent("""
        from inclproj.app import app

        @app.task(name="incl.double")
        def double(n: int) -> int:
            return 2 * n
    """))
    (pkg / "more.py").write_text(textwrap.dedent("""
        from inclproj.app import app

        @app.task(name="incl.neg")
        def neg(n: int) -> int:
            return -n
    """))
    (pkg / "broken.py").write_text("import a_module_nobody_has\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [m for m in sys.modules if m == "inclproj" or m.startswith("inclproj.")]:
        del sys.modules[name]


def test_a_worker_imports_the_included_modules_first(project):
    from inclproj.app import app

    assert app.tasks == {} and "inclproj.tasks" not in sys.modules
    job = app.store.jobs.enqueue("incl.double", {"args": [21], "kwargs": {}})
    try:
        assert app.run_worker(max_jobs=1, install_signals=False, poll_interval=0.01) == 1
        assert set(app.tasks) == {"incl.double"}
        assert app.store.jobs.get(job).result == 42
    finally:
        app.store.close()


def test_autodiscover_adds_modules_and_answers_what_it_imported(project):
    from inclproj.app import app

    assert app.autodiscover("inclproj.more") == ["inclproj.tasks", "inclproj.more"]
    assert set(app.tasks) == {"incl.double", "incl.neg"}
    assert app.autodiscover() == ["inclproj.tasks", "inclproj.more"]  # again: nothing new, no error


def test_a_missing_module_is_refused_by_name(project):
    from inclproj.app import app

    with pytest.raises(InvalidArgument, match="cannot import 'inclproj.nope'") as info:
        app.autodiscover("inclproj.nope")
    assert info.value.code == "TN1001"
    app.include.remove("inclproj.nope")
    with pytest.raises(ModuleNotFoundError, match="a_module_nobody_has"):  # the module's own error
        app.autodiscover("inclproj.broken")


def test_include_takes_module_names():
    import tenure

    with pytest.raises(InvalidType, match="list of module names"):
        tenure.App("sqlite://:memory:", include="myproj.tasks")
    with pytest.raises(InvalidType):
        tenure.App("sqlite://:memory:", include=[""])
