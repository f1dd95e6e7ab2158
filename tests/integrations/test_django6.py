"""The same end-to-end Django project on Django 6's built-in ``django.tasks``.

Django 6 needs Python 3.12+, and this suite runs on 3.11: the test builds a Python 3.12 virtual
environment (Django 6, psycopg, tenure from this checkout) and runs the project there. Without a
Python 3.12+ interpreter on the machine it is skipped, saying so."""

from __future__ import annotations

import pytest

from .test_django import run_project


@pytest.mark.timeout(900)
@pytest.mark.parametrize("alias", ["default", "pg"])
def test_django6_backend_end_to_end(django6_python, tmp_path, alias):
    run_project(django6_python, tmp_path, alias)
