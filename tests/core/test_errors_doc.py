"""docs/errors.md documents exactly the error table (spec 9.1)."""

from __future__ import annotations

import re
from pathlib import Path

from tenure import errors

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def test_every_code_is_documented_once_and_unique():
    text = DOC.read_text()
    documented = re.findall(r"^\| `(TN\d{4})` \| `(\w+)`", text, re.M)
    assert sorted(documented) == sorted((c, cls.__name__) for c, cls in errors.ERROR_TABLE.items())
    codes = [cls.code for cls in errors.ERROR_TABLE.values()]
    assert len(codes) == len(set(codes))


def test_every_error_class_is_in_the_table():
    classes = {obj for obj in vars(errors).values()
               if isinstance(obj, type) and issubclass(obj, errors.TenureError) and obj is not errors.TenureError}
    assert classes == set(errors.ERROR_TABLE.values())


def test_errors_pickle_with_their_code():
    import pickle

    exc = errors.LeaseSuperseded("gen 1 by gen 2", held=1, current=2)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is errors.LeaseSuperseded and back.code == "TN2066" and back.details["current"] == 2
