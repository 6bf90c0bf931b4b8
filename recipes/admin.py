from django.contrib import admin

from recipes.models import Recipe, RecipeVersion


@admin.register(Recipe)
class RecipeAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "kind", "origin", "valid", "enabled", "updated_at"]
    list_filter = ["kind", "origin", "valid", "enabled"]
    search_fields = ["slug", "name", "description"]


@admin.register(RecipeVersion)
class RecipeVersionAdmin(admin.ModelAdmin):
    list_display = ["recipe", "number", "author", "created_at"]
    readonly_fields = ["recipe", "number", "source", "sha256", "author", "note", "created_at"]
