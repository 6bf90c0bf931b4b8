"""A driven run's pipeline steps get a row kind of their own (`pipeline_step`): they were
`agent` rows, told apart from a Python loop's agents by having no max_iterations."""

from django.db import migrations


def forward(apps, schema_editor):
    NodeRun = apps.get_model("runs", "NodeRun")
    NodeRun.objects.filter(kind="agent", run__recipe__kind="driven").update(kind="pipeline_step")


def backward(apps, schema_editor):
    NodeRun = apps.get_model("runs", "NodeRun")
    NodeRun.objects.filter(kind="pipeline_step").update(kind="agent")


class Migration(migrations.Migration):
    dependencies = [
        ("loops", "0001_driven_loops"),
        ("runs", "0015_step_machine_tables_to_planeai"),
    ]

    operations = [migrations.RunPython(forward, backward)]
