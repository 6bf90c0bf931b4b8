"""The step machine's tables leave the kernel app (issue 24): `Handoff` and `ReviewRequest`
are now models of `loops.stepmachine` (label `planeai`). Only Django's state changes here;
the tables and their rows stay, and `planeai`'s own migrations take them over."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("runs", "0014_run_snapshot")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Handoff"),
                migrations.DeleteModel(name="ReviewRequest"),
            ],
            database_operations=[],
        ),
    ]
