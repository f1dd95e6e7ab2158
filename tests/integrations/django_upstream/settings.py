"""Settings of the vendored upstream suites (tests/integrations/django_upstream/README.md).

``TENURE_UP_SUITE`` picks the suite (``django6`` or ``backport``), ``TENURE_UP_ENGINE`` the
database (``sqlite``: a file whose test database is another file; ``pg``: the PostgreSQL database
named by ``TENURE_UP_PG_NAME``, whose test database Django's runner creates and drops)."""

import os

SUITE = os.environ["TENURE_UP_SUITE"]
SECRET_KEY = "tenure-upstream-tests"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "tenure.contrib.django"]
if SUITE == "backport":
    # the backport's suite also renders views and the admin (its tests/urls.py)
    INSTALLED_APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                      "django.contrib.messages", "django.contrib.sessions", "django_tasks",
                      "tenure.contrib.django"]
    ROOT_URLCONF = "tests.integrations.django_upstream.backport.urls"
    MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware",
                  "django.contrib.auth.middleware.AuthenticationMiddleware",
                  "django.contrib.messages.middleware.MessageMiddleware"]
    TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                  "OPTIONS": {"context_processors": ["django.contrib.auth.context_processors.auth",
                                                     "django.contrib.messages.context_processors.messages",
                                                     "django.template.context_processors.request"]}}]
if os.environ.get("TENURE_UP_ENGINE") == "pg":
    DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": os.environ["TENURE_UP_PG_NAME"],
                             "USER": "postgres", "HOST": "127.0.0.1", "PORT": "5432"}}
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["TENURE_UP_SQLITE"],
                             "TEST": {"NAME": os.environ["TENURE_UP_SQLITE"] + ".test"}}}
TASKS = {"default": {"BACKEND": "tests.integrations.django_upstream.worked.WorkedTenureBackend", "QUEUES": []}}
