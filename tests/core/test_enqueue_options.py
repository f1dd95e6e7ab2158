"""One table of enqueue options (src/tenure/enqueue_options.py): the surfaces that cannot read it
at call time (a typed signature, the CLI's flags, the Django mapping, docs/enqueue-options.md)
are held to it here, so none keeps a private list. The behaviour of each surface on both engines:
tests/queues/test_enqueue_options.py."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tenure import enqueue_options as eo
from tenure import jobs_base
from tenure.errors import InvalidArgument, InvalidType
from tenure.jobs import Jobs
from tenure.queues import Queues

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_options_doc", ROOT / "scripts" / "gen_options_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_page_is_the_table() -> None:
    page = (ROOT / "docs" / "enqueue-options.md").read_text()
    assert page == _generator().render(), "run: PYTHONPATH=$PWD/src python scripts/gen_options_doc.py"
    for name in eo.OPTIONS:
        assert len(re.findall(rf"^\| `{name}` \|", page, re.M)) == 2  # its row in both tables


def test_the_docs_page_lists_every_surface_with_a_column() -> None:
    page = (ROOT / "docs" / "enqueue-options.md").read_text()
    header = next(line for line in page.splitlines() if line.startswith("| option | enqueue |"))
    assert [c.strip() for c in header.strip("|").split("|")][1:] == list(eo.SURFACES)


def test_every_option_cites_a_rule_of_the_spec() -> None:
    spec = (ROOT / "docs" / "spec.md").read_text()
    for option in eo.OPTIONS.values():
        m = re.fullmatch(r"spec (\d+\.\d+|§\d+)", option.spec)
        assert m, f"{option.name}: {option.spec!r}"
        row = m.group(1)
        assert (f"| {row} |" in spec) if "." in row else (f"## {row} " in spec), f"{option.name}: no {row}"
        assert option.doc and option.type, option.name
        assert option.surfaces <= set(eo.SURFACES), option.name


def test_enqueue_takes_exactly_the_table_s_enqueue_options() -> None:
    params = inspect.signature(Jobs.enqueue).parameters
    assert [p for p in params if params[p].kind is not inspect.Parameter.VAR_KEYWORD] == [
        "self", "kind", "payload", "conn"]
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    assert set(eo.EnqueueOptions.__annotations__) | {"conn"} == eo.names(eo.ENQUEUE)


def test_queues_create_and_update_take_exactly_the_table_s_queue_options() -> None:
    for method in (Queues.create, Queues.update):
        params = inspect.signature(method).parameters
        assert [p for p in params if params[p].kind is not inspect.Parameter.VAR_KEYWORD] == ["self", "name"]
    assert set(eo.QueueOptions.__annotations__) == eo.names(eo.QUEUE)


def test_the_cli_flags_are_the_table_s_cli_options() -> None:
    from tenure.cli.enqueue import enqueue

    params = {p.name: p for p in enqueue.params}
    own = {"url", "app_spec", "from_file", "batch_size", "as_json"}  # the command's, not a job's
    assert set(params) - own == eo.names(eo.CLI)
    for name in eo.names(eo.CLI):
        cli = eo.OPTIONS[name].cli
        if cli is None:
            assert name == "kind" and params[name].param_type_name == "argument"
        else:
            assert params[name].opts == [cli.flag], name
            assert params[name].multiple is cli.form.endswith("*"), name


def test_the_django_mapping_reads_the_table_s_django_options() -> None:
    pytest.importorskip("django")
    from tenure.contrib.django.backend import TenureTask, enqueue_options

    attrs = {o.django for o in eo.on(eo.DJANGO).values()}
    assert None not in attrs
    fields = {f.name for f in TenureTask.__dataclass_fields__.values()}
    assert attrs <= fields, attrs - fields
    task = SimpleNamespace(**{a: f"value of {a}" for a in attrs}, other="not an option")
    read = enqueue_options(task)
    assert set(read) == eo.names(eo.DJANGO)
    assert all(read[n] == f"value of {eo.OPTIONS[n].django}" for n in read)
    assert enqueue_options(SimpleNamespace(**dict.fromkeys(attrs))) == {}  # unset: left out


def test_the_fast_paths_name_only_table_options() -> None:
    many = eo.names(eo.MANY)
    assert jobs_base._PLAIN_KEYS <= many and jobs_base._COLLIDING_KEYS <= many
    assert jobs_base._QUEUED_COLUMNS <= {o.column for o in eo.on(eo.ENQUEUE).values()}


def test_a_misspelt_option_is_refused_with_the_nearest_name() -> None:
    exc = eo.refusal("singelton_key", eo.ENQUEUE)
    assert isinstance(exc, InvalidArgument) and exc.code == "TN1001"
    assert "did you mean 'singleton_key'?" in str(exc) and exc.details["option"] == "singelton_key"
    assert "did you mean" not in str(eo.refusal("zzz", eo.ENQUEUE))


def test_an_option_of_another_surface_says_where_it_belongs() -> None:
    assert "a queue setting" in str(eo.refusal("rate_limit", eo.ENQUEUE))
    assert "queues.create" in str(eo.refusal("policy", eo.TASK))
    assert "cron:<name>" in str(eo.refusal("id", eo.SCHEDULE))
    assert isinstance(eo.refusal(3, eo.MANY), InvalidType)


def test_refuse_names_the_same_option_whatever_the_order() -> None:
    for given in (["zeta_opt", "alpha_opt"], ["alpha_opt", "zeta_opt"]):
        with pytest.raises(InvalidArgument, match="alpha_opt"):
            eo.refuse(given, eo.ENQUEUE)
    eo.refuse(["queue", "priority"], eo.ENQUEUE)  # accepted: no error


def test_tenure_queues_create_and_update_have_a_flag_per_queue_option() -> None:
    from tenure.cli.queues import queues_create, queues_update

    for command in (queues_create, queues_update):
        params = {p.name for p in command.params} - {"name", "url", "as_json"}
        assert params == eo.names(eo.QUEUE), command.name


def test_the_operations_page_lists_the_table_s_flags() -> None:
    page = (ROOT / "docs" / "operations.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `tenure enqueue KIND --payload"))
    listed = set(re.findall(r"--[a-z-]+", row.split("|")[1]))
    assert listed == {o.cli.flag for o in eo.on(eo.CLI).values() if o.cli}


def test_every_duration_option_reads_seconds_timedeltas_and_text_alike() -> None:
    """The table's durations use the one parser (tenure.durations): ``"90s"``, ``"1.5m"``, 90,
    90.0 and a 90-second timedelta are the same 90 000 ms on every surface; junk text is TN1001
    and a non-duration type TN1002, naming the option."""
    import datetime as dt

    durations = [o for o in eo.OPTIONS.values() if o.type == "seconds"]
    assert {o.name for o in durations} >= {"delay", "timeout", "singleton_for", "debounce", "retry_delay",
                                             "retry_delay_max", "retention", "delete_after"}
    for opt in durations:
        assert opt.check is not None
        got = {repr(x): opt.check(x) for x in ("90s", "1.5m", " 90 ", 90, 90.0, dt.timedelta(seconds=90))}
        assert set(got.values()) == {90_000}, (opt.name, got)
        assert opt.check("250ms") == 250
        with pytest.raises(InvalidArgument, match=opt.name):
            opt.check("ninety seconds")
        with pytest.raises(InvalidType, match=opt.name):
            opt.check([90])
