"""The record of a host's tool calls that changed a loop (HostCall), replayed by a turn
resumed after a lost worker."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("loops", "0002_pipeline_step_rows"),
        ("runs", "0017_agent_steps_as_iterations"),
    ]

    operations = [
        migrations.CreateModel(
            name="HostCall",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("seq", models.PositiveIntegerField()),
                ("name", models.CharField(max_length=40)),
                ("arguments", models.JSONField(blank=True, default=dict)),
                (
                    "iteration",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="The loop iteration the call ran, if it ran one.",
                        null=True,
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "host_iteration",
                    models.ForeignKey(
                        help_text="The turn.",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="runs.iteration",
                    ),
                ),
                (
                    "loop",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="calls",
                        to="loops.loop",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="runs.run"
                    ),
                ),
            ],
            options={
                "ordering": ["host_iteration", "seq"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("host_iteration", "seq"), name="host_call_seq_unique"
                    )
                ],
            },
        ),
    ]
