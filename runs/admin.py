from django.contrib import admin

from runs.models import Gate, Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "recipe", "status", "started_by", "created_at"]
    list_filter = ["status"]
    raw_id_fields = ["recipe", "recipe_version", "started_by", "rerun_of"]


@admin.register(Gate)
class GateAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "node_id", "kind", "status", "decided_by", "decided_at", "surface"]
    list_filter = ["status", "kind", "surface"]


from runs import admin_providers  # noqa: E402, F401
