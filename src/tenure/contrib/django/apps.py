from django.apps import AppConfig


class TenureConfig(AppConfig):
    name = "tenure.contrib.django"
    label = "tenure"
    verbose_name = "tenure job queue"
