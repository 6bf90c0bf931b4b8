"""A review request whose branch holds no commit the target lacks is recorded as nothing to
merge (a new choice of its status; the column is unchanged)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("planeai", "0002_own_table_names"),
    ]

    operations = [
        migrations.AlterField(
            model_name="reviewrequest",
            name="status",
            field=models.CharField(
                choices=[
                    ("open", "Open"),
                    ("merged", "Merged"),
                    ("nothing_to_merge", "Nothing to merge"),
                    ("closed", "Closed"),
                ],
                default="open",
                max_length=20,
            ),
        ),
    ]
