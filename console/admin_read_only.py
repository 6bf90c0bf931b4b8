"""The admin of rows the console writes itself (gates, deliveries, handoffs, review
requests): to look up, never added, changed or deleted by hand."""

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
