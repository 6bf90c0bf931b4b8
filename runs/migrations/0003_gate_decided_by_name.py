from django.db import migrations, models


def fill_names(apps, schema_editor):
    """Earlier decisions: the user's name, or what the engine's cancel stood for."""
    Gate = apps.get_model("runs", "Gate")
    for gate in Gate.objects.exclude(status="pending").select_related("decided_by"):
        if gate.decided_by_id:
            name = gate.decided_by.username
        else:
            name = {"engine": "the engine", "cli": "command line"}.get(gate.surface, gate.surface)
        Gate.objects.filter(pk=gate.pk).update(decided_by_name=name)


class Migration(migrations.Migration):
    dependencies = [("runs", "0002_providers_and_conversations")]

    operations = [
        migrations.AddField(
            model_name="gate",
            name="decided_by_name",
            field=models.CharField(
                blank=True, help_text="Who decided, as every page shows it.", max_length=150
            ),
        ),
        migrations.AlterField(
            model_name="gate",
            name="surface",
            field=models.CharField(
                blank=True,
                choices=[
                    ("console", "Console"),
                    ("api", "Api"),
                    ("cli", "Cli"),
                    ("engine", "Engine"),
                    ("sweep", "Sweep"),
                ],
                max_length=20,
            ),
        ),
        migrations.RunPython(fill_names, migrations.RunPython.noop),
    ]
