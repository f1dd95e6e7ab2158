"""The records a claim builds on the hot path (tenure.job_rows.positional_builder): the same
frozen records as their own constructors make, built at slot speed."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from tenure.job_rows import _claim, _job, _lease, positional_builder
from tenure.records import Claim, Job, Lease


def _values(cls: type) -> list:
    return [f"v{i}" for i in range(len(dataclasses.fields(cls)))]


@pytest.mark.parametrize("cls,build", [(Job, _job), (Lease, _lease), (Claim, _claim)])
def test_a_built_record_is_the_record_its_constructor_makes(cls, build) -> None:
    assert build is not cls  # the fast path is in use, not the fallback
    values = _values(cls)
    made, built = cls(*values), build(*values)
    assert type(built) is cls and built == made and hash(built) == hash(made) and repr(built) == repr(made)
    assert pickle.loads(pickle.dumps(built)) == made
    assert dataclasses.replace(built, **{dataclasses.fields(cls)[0].name: "other"}) != made
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(built, dataclasses.fields(cls)[0].name, "changed")


def test_a_record_whose_layout_the_twin_cannot_take_keeps_its_own_constructor() -> None:
    @dataclasses.dataclass(frozen=True)  # no slots: a __dict__ layout, not the twin's
    class Plain:
        a: int
        b: int

    assert positional_builder(Plain) is Plain
