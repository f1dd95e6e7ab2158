"""The modules here run under Django's own test runner (test_django_upstream.py starts it), not
under pytest: they need Django configured and, for ``django6/``, Django 6 on Python 3.12+."""

collect_ignore_glob = ["django6/*", "backport/*", "durable_differences.py", "tenure_semantics.py",
                       "tenure_tasks.py", "worked.py", "settings.py"]
