"""A run's status is the kernel's (issue 35): the words a step machine set as statuses
become its `phase`, beside the kernel status that says what the run can still do. An
active one stays active (running, or paused until a person steps in), a finished one stays
finished (completed), and every page shows the same word as before (`Run.status_word`).

Their `run_<word>` events keep their names and learn the kernel status (runs.ag_ui reads
it). Backwards, the phase becomes the status again."""

from django.db import migrations, models

# Each status a step machine set: (the kernel's status, the step machine's phase).
MAPPING = {
    "observing": ("running", "observing"),
    "verifying": ("running", "verifying"),
    "blocked": ("paused", "blocked"),
    "needs_human": ("paused", "needs_human"),
    "completed_unreviewed": ("completed", "completed_unreviewed"),
    "approved": ("completed", "approved"),
    "merged": ("completed", "merged"),
}


def statuses_to_phases(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    RunEvent = apps.get_model("runs", "RunEvent")
    for old, (status, phase) in MAPPING.items():
        Run.objects.filter(status=old).update(status=status, phase=phase)
    events = RunEvent.objects.filter(kind__in=[f"run_{word}" for word in MAPPING])
    told = []
    for event in events.only("pk", "kind", "data").iterator(chunk_size=2000):
        data = event.data if isinstance(event.data, dict) else {}
        if "status" not in data:
            event.data = {**data, "status": MAPPING[event.kind.removeprefix("run_")][0]}
            told.append(event)
    RunEvent.objects.bulk_update(told, ["data"], batch_size=500)


def phases_to_statuses(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    for old in MAPPING:
        Run.objects.filter(phase=old).update(status=old, phase="")


class Migration(migrations.Migration):
    dependencies = [("runs", "0015_step_machine_tables_to_planeai")]

    operations = [
        migrations.RemoveIndex(model_name="run", name="run_status_recent"),
        migrations.RemoveIndex(model_name="run", name="run_finished_recent"),
        migrations.AddField(
            model_name="run",
            name="phase",
            field=models.CharField(blank=True, default="", max_length=20),
        ),
        migrations.AlterField(
            model_name="run",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("running", "Running"),
                    ("paused", "Paused"),
                    ("completed", "Completed"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                    ("budget_exceeded", "Budget Exceeded"),
                ],
                default="pending",
                max_length=20,
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["status", "phase", "-id"], name="run_status_recent"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["phase", "-id"], name="run_phase_recent"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                models.OrderBy(models.F("finished_at"), descending=True),
                models.OrderBy(models.F("id"), descending=True),
                condition=models.Q(("status__in", ["cancelled", "completed", "failed"])),
                name="run_finished_recent",
            ),
        ),
        migrations.RunPython(statuses_to_phases, phases_to_statuses),
    ]
