# Vendored from django-tasks 0.12.0 (tests/urls.py), BSD-3-Clause: Copyright (c) Jake Howard and
# individual contributors; the licence is ../LICENSE.django-tasks. tenure's changes, each marked
# "tenure:", only select TenureBackend (run by a real worker: ../worked.py) where the file selected
# ImmediateBackend, import this package instead of the suite's top-level "tests", and skip the
# tests documented in ../README.md ("Where a durable worker differs"), each replaced by a test in
# ../durable_differences.py.
from django.contrib import admin
from django.urls import path

from . import views

urlpatterns = [
    path("meaning-of-life/", views.calculate_meaning_of_life, name="meaning-of-life"),
    path("result/<str:result_id>", views.get_task_result, name="result"),
    path(
        "meaning-of-life-async/",
        views.calculate_meaning_of_life_async,
        name="meaning-of-life-async",
    ),
    path("admin/", admin.site.urls),
]
