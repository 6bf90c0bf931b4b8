"""The step machine takes over its tables from the kernel app (issue 24).

`runs` 0015 dropped `Handoff` and `ReviewRequest` from its state; here they join this app's
state over the same tables (`runs_handoff`, `runs_reviewrequest`), so no row moves and the
database is not touched. Their content types move with them, and so do the permissions and
admin log entries that point at those. The next migration gives the tables this app's names.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MODELS = ("handoff", "reviewrequest")


def move_content_types(source: str, target: str):
    def move(apps, schema_editor):
        content_types = apps.get_model("contenttypes", "ContentType").objects.db_manager(
            schema_editor.connection.alias
        )
        for model in MODELS:
            # A content type the target already has (made by a post_migrate since) wins; the
            # source's is then stale and `remove_stale_contenttypes` may remove it.
            if not content_types.filter(app_label=target, model=model).exists():
                content_types.filter(app_label=source, model=model).update(app_label=target)

    return move


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("runs", "0015_step_machine_tables_to_planeai"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ReviewRequest",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("repository", models.CharField(max_length=1000)),
                        ("branch", models.CharField(max_length=255)),
                        ("target_branch", models.CharField(max_length=255)),
                        ("head_commit", models.CharField(max_length=64)),
                        (
                            "target_commit",
                            models.CharField(
                                help_text="The target's head when recorded.", max_length=64
                            ),
                        ),
                        ("commits", models.JSONField(blank=True, default=list)),
                        ("diff_stat", models.TextField(blank=True)),
                        ("diff", models.TextField(blank=True)),
                        ("diff_truncated", models.BooleanField(default=False)),
                        (
                            "push",
                            models.TextField(
                                blank=True, help_text="What pushing to the remote said, if tried."
                            ),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("open", "Open"),
                                    ("merged", "Merged"),
                                    ("closed", "Closed"),
                                ],
                                default="open",
                                max_length=20,
                            ),
                        ),
                        ("merged_by_name", models.CharField(blank=True, max_length=150)),
                        ("merged_at", models.DateTimeField(blank=True, null=True)),
                        ("merge_commit", models.CharField(blank=True, max_length=64)),
                        ("last_refusal", models.TextField(blank=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "merged_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "run",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="review",
                                to="runs.run",
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["-created_at"],
                        "db_table": "runs_reviewrequest",
                    },
                ),
                migrations.CreateModel(
                    name="Handoff",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("role", models.CharField(max_length=100)),
                        ("status", models.CharField(max_length=20)),
                        ("summary", models.TextField(blank=True)),
                        ("data", models.JSONField(blank=True, null=True)),
                        (
                            "content",
                            models.JSONField(
                                help_text="The handoff document as recorded (schema, status, ...)."
                            ),
                        ),
                        (
                            "seq",
                            models.PositiveIntegerField(
                                help_text="Sequence number of the run event recording it."
                            ),
                        ),
                        ("recorded_by_name", models.CharField(blank=True, max_length=150)),
                        (
                            "surface",
                            models.CharField(
                                choices=[
                                    ("console", "Console"),
                                    ("api", "Api"),
                                    ("cli", "Cli"),
                                    ("agent", "Agent"),
                                ],
                                max_length=20,
                            ),
                        ),
                        ("recorded_at", models.DateTimeField(auto_now_add=True)),
                        ("consumed_at", models.DateTimeField(blank=True, null=True)),
                        ("consumed_by_step", models.CharField(blank=True, max_length=200)),
                        (
                            "iteration",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="runs.iteration",
                            ),
                        ),
                        (
                            "recorded_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "run",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="handoffs",
                                to="runs.run",
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["run", "seq"],
                        "db_table": "runs_handoff",
                        "indexes": [
                            models.Index(fields=["run", "role", "-seq"], name="handoff_latest")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            move_content_types("runs", "planeai"), move_content_types("planeai", "runs")
        ),
    ]
