"""Settings of the test Django project. The database file and PG URL come from the environment."""

import os

SECRET_KEY = "tenure-tests"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "tenure.contrib.django", "tests.integrations.djproject.shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["TENURE_DJ_SQLITE"]}}
TASKS = {"default": {"BACKEND": "tenure.contrib.django.TenureBackend", "OPTIONS": {"DATABASE": "default"}},
         # without PostgreSQL, the "pg" backend still exists (tasks bind to it at import) on a file
         "pg": {"BACKEND": "tenure.contrib.django.TenureBackend",
                "OPTIONS": {"URL": "sqlite:///" + os.environ["TENURE_DJ_SQLITE"] + ".pg-standin"}}}
if os.environ.get("TENURE_DJ_PG"):
    DATABASES["pg"] = {"ENGINE": "django.db.backends.postgresql", "NAME": os.environ["TENURE_DJ_PG_NAME"],
                       "USER": "postgres", "HOST": "127.0.0.1", "PORT": "5432"}
    TASKS["pg"] = {"BACKEND": "tenure.contrib.django.TenureBackend", "OPTIONS": {"DATABASE": "pg"}}
