"""The adopted tables take this app's default names (`planeai_handoff`,
`planeai_reviewrequest`): a rename, rows and ids kept. Nothing refers to these tables by
name (no raw SQL, no foreign key into them), so the rename is all there is to do."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("planeai", "0001_adopt_step_machine_tables")]

    operations = [
        migrations.AlterModelTable(name="handoff", table=None),
        migrations.AlterModelTable(name="reviewrequest", table=None),
    ]
