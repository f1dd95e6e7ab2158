"""``describe_run``: the stable view of a run that ``tenure runs show`` and the dashboard use."""

from __future__ import annotations

from tenure.flow import DESCRIBE_VERSION, Flow, describe_run

from ._support import Recorder, wait_for, wait_state


def build(gate, started: Recorder) -> Flow:
    flow = Flow("shown", revision="3", output="c")
    flow.registry.add("a", lambda ctx: {"rows": 2}, version=1)

    def b(ctx):
        started("b")
        gate.wait(10)
        if ctx.attempt == 1:
            raise RuntimeError("flaky")
        return 2

    flow.registry.add("b", b, version=4)
    flow.registry.add("c", lambda ctx: ctx["a"]["rows"] + ctx["b"], version=1)
    flow.node("a")
    flow.node("b", needs=["a"])
    flow.node("c", needs=["a", "b"])
    return flow


def statuses(view) -> list[tuple[str, str]]:
    return [(n["id"], n["status"]) for n in view["nodes"]]


def test_describe_run_shows_done_running_ready_and_pending_nodes(any_store, clock, start_runner, gates):
    gate, started = gates(), Recorder()
    flow = build(gate, started)
    start_runner(any_store, [flow])
    assert describe_run(any_store, "nope") is None
    job_id = any_store.jobs.enqueue("shown", {"input": {"day": 1}}, id="r-1")
    wait_for(lambda: started.snapshot(), what="b to start")
    view = describe_run(any_store, job_id)  # no flow object: the recorded shape is enough
    assert view["version"] == DESCRIBE_VERSION and view["state"] == "leased" and view["generation"] == 1
    assert statuses(view) == [("a", "done"), ("b", "running"), ("c", "pending")]
    assert view["nodes"][0] == {"id": "a", "task": "a", "needs": [], "status": "done", "value": {"rows": 2},
                                "generation": 1, "waiting": []}
    assert view["identity"]["revision"] == "3" and view["identity"]["task_versions"] == {"a": 1, "b": 4, "c": 1}
    assert view["identity"]["flow"] == "shown" and view["legacy"] is False
    assert describe_run(any_store, job_id, flow=flow)["nodes"] == view["nodes"]

    gate.set()
    failed = wait_state(any_store, job_id, "failed")
    view = describe_run(any_store, job_id)
    assert statuses(view) == [("a", "done"), ("b", "ready"), ("c", "pending")]  # waiting for its retry
    assert "flaky" in view["last_error"]

    clock.advance(failed.run_at - clock())
    any_store.jobs.enqueue("nudge", None)
    wait_state(any_store, job_id, "done")
    view = describe_run(any_store, job_id, flow=flow)
    assert view["result"] == 4 and view["identity"] is None  # pruned with the checkpoints
    assert statuses(view) == [("a", "done"), ("b", "done"), ("c", "done")]
    assert describe_run(any_store, job_id)["nodes"] == []  # without the flow nothing is left to show
