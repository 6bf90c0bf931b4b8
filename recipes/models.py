"""What a recipe is: an editable YAML source with an immutable history of versions."""

import hashlib

from django.conf import settings
from django.db import models, transaction

from console.models import default_project_id
from recipes import readers


class RecipeQuerySet(models.QuerySet):
    def visible_to(self, user, perm: str = "recipes.view_recipe"):
        """The recipes of the projects where `user` holds `perm` (console.projects)."""
        from console.projects import visible

        return visible(self, user, perm)


class Recipe(models.Model):
    class Origin(models.TextChoices):
        BUILTIN = "builtin", "Bundled"
        USER = "user", "User"
        PROJECT = "project", "Project"
        CONSOLE = "console", "Created in the console"
        SCRIPT = "script", "Recorded from a script"

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # Whose it is: its runs, schedules and webhooks are that project's (console.projects).
    project = models.ForeignKey(
        "console.Project",
        on_delete=models.PROTECT,
        related_name="recipes",
        default=default_project_id,
    )
    # The kind of loop whose format the source is (runs.kinds): no closed set, so a kind is
    # an app to install, not a migration; a system check (runs.checks) finds a recipe whose
    # kind no installed app registers.
    kind = models.CharField(max_length=20, blank=True)
    source = models.TextField(help_text="The recipe's YAML.")
    enabled = models.BooleanField(default=True)
    origin = models.CharField(max_length=20, choices=Origin.choices, default=Origin.CONSOLE)
    source_path = models.CharField(
        max_length=1000, blank=True, help_text="File it was synced from."
    )
    edited_locally = models.BooleanField(
        default=False, help_text="Edited in the console; a sync leaves it alone unless forced."
    )
    valid = models.BooleanField(default=True)
    problems = models.JSONField(
        default=dict, blank=True, help_text="Last validation: errors, warnings."
    )
    current_version = models.ForeignKey(
        "RecipeVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RecipeQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]
        permissions = [
            (
                "write_shell",
                "Can write shell in recipes (bash steps, until_bash, command and inline providers)",
            )
        ]

    def __str__(self):
        return self.slug

    @property
    def loop_kind(self):
        """The registered kind this recipe is of (runs.kinds.UnknownKind when none is)."""
        return readers.get(self.kind)

    @property
    def kind_label(self) -> str:
        kind = readers.find(self.kind)
        return kind.label if kind is not None else self.kind

    @property
    def source_read_only(self) -> str:
        """Why this recipe's source cannot change in the console ("" when it can)."""
        kind = readers.find(self.kind)
        return kind.source_read_only if kind is not None else ""

    @transaction.atomic
    def record_version(self, source: str, author=None, note: str = "") -> "RecipeVersion":
        """Make `source` current, adding an immutable version unless it is unchanged."""
        digest = hashlib.sha256(source.encode()).hexdigest()
        latest = self.versions.order_by("-number").first()
        if latest and latest.sha256 == digest:
            version = latest
        else:
            version = RecipeVersion.objects.create(
                recipe=self,
                number=(latest.number + 1) if latest else 1,
                source=source,
                sha256=digest,
                author=author,
                note=note,
            )
        self.source = source
        self.current_version = version
        self.save()
        return version


class RecipeVersion(models.Model):
    recipe = models.ForeignKey(Recipe, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    source = models.TextField()
    sha256 = models.CharField(max_length=64)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["recipe", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["recipe", "number"], name="recipe_version_number_unique"
            )
        ]

    def __str__(self):
        return f"{self.recipe.slug} v{self.number}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("Recipe versions are immutable; record a new version instead.")
        super().save(*args, **kwargs)
