"""Configured agent providers, and the conversations of the HTTP ones.

Secrets never live here: a provider names the environment variable that holds its key.
"""

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, URLValidator
from django.db import models, transaction


class ProviderConfigQuerySet(models.QuerySet):
    def usable_in(self, project_id: int | None):
        """The accounts a run of project `project_id` may call: the shared ones and its
        project's (None, a process with no run: the shared ones)."""
        return self.filter(models.Q(project__isnull=True) | models.Q(project_id=project_id))

    def default_in(self, project_id: int | None):
        """The enabled default for `project_id`'s runs: its project's own, else the shared
        one; None when neither is set."""
        found = self.usable_in(project_id).filter(is_default=True, enabled=True)
        return found.order_by(models.F("project_id").asc(nulls_last=True)).first()


class ProviderConfig(models.Model):
    class Kind(models.TextChoices):
        COMMAND = "command", "Command (prompt on stdin, answer on stdout)"
        CLAUDE = "claude", "Claude Code CLI"
        CODEX = "codex", "Codex CLI"
        OPENCODE = "opencode", "OpenCode CLI"
        GEMINI = "gemini", "Gemini CLI"
        OPENAI = "openai", "OpenAI-compatible chat completions"
        ANTHROPIC = "anthropic", "Anthropic Messages API"
        DEMO = "demo", "Demo agent (deterministic, offline)"

    # Whose account it is: empty, shared by every project; else only that project's runs
    # use it and only its members see it.
    project = models.ForeignKey(
        "console.Project",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="providers",
        help_text="Only this project's recipes use it. Empty: every project.",
    )
    name = models.SlugField(
        max_length=100, unique=True, help_text="What recipes write in `provider:`."
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    command = models.CharField(
        max_length=1000,
        blank=True,
        help_text="CLI kinds: the program (and fixed arguments). Default: the kind's binary on PATH.",
    )
    base_url = models.CharField(
        max_length=500,
        blank=True,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="HTTP kinds: the API root, e.g. https://api.openai.com/v1",
    )
    model = models.CharField(max_length=200, blank=True, help_text="Default model.")
    api_key_env = models.CharField(
        max_length=200,
        blank=True,
        help_text="NAME of the environment variable holding the API key (never the key itself).",
    )
    options = models.JSONField(default=dict, blank=True, help_text="Kind-specific extras.")
    # Limits of the provider's account, shared by every worker (runs/providers/limits.py).
    max_concurrent = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="At most this many calls at once (every worker).",
    )
    requests_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="At most this many calls a minute.",
    )
    tokens_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="No new call once this many tokens went in a minute.",
    )
    is_default = models.BooleanField(
        default=False,
        help_text="Used when a recipe and its node name no provider: by its project's "
        "recipes, or (shared) by those of every project without a default of its own.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProviderConfigQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            # One shared default, and one default in each project.
            models.UniqueConstraint(
                fields=["is_default"],
                condition=models.Q(is_default=True, project__isnull=True),
                name="providerconfig_one_default",
            ),
            models.UniqueConstraint(
                fields=["project"],
                condition=models.Q(is_default=True),
                name="providerconfig_one_default_per_project",
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.kind})"

    def save(self, *args, **kwargs):
        # One default where it is (shared, or its project's): choosing a new one quietly
        # retires the previous one.
        with transaction.atomic():
            if self.is_default:
                ProviderConfig.objects.filter(is_default=True, project_id=self.project_id).exclude(
                    pk=self.pk
                ).update(is_default=False)
            super().save(*args, **kwargs)

    def clean(self):
        from runs.engine.shell_context import unsafe_references
        from runs.providers.policy import key_env_problem

        if self.api_key_env and not self.api_key_env.replace("_", "").isalnum():
            raise ValidationError(
                {"api_key_env": "Give the NAME of an environment variable, e.g. OPENAI_API_KEY."}
            )
        if problem := key_env_problem(self.api_key_env, self.kind):
            raise ValidationError({"api_key_env": problem[0].upper() + problem[1:] + "."})
        if self.kind == self.Kind.OPENAI and not self.base_url:
            raise ValidationError({"base_url": "An OpenAI-compatible provider needs a base URL."})
        if self.kind == self.Kind.COMMAND and not self.command.strip():
            raise ValidationError({"command": "A command provider needs a command."})
        if self.command and (problems := unsafe_references(self.command)):
            first = problems[0]
            raise ValidationError({"command": f"Line {first.line}: {first.explanation}."})

    def as_config(self) -> dict:
        """The same shape as a recipe's inline `providers:` entry."""
        return {
            **(self.options or {}),
            "command": self.command or None,
            "base_url": self.base_url or None,
            "model": self.model or None,
            "api_key_env": self.api_key_env or None,
            "max_concurrent": self.max_concurrent,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
        }


class Conversation(models.Model):
    """The message history of an HTTP provider's session (`fresh_context: false`).

    CLI agents keep their own sessions; chat APIs are stateless, so the console keeps the
    history and sends it again on the next turn."""

    session_id = models.CharField(max_length=64, unique=True)
    provider = models.CharField(max_length=100)
    messages = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"{self.provider} conversation {self.session_id[:8]} ({len(self.messages)} messages)"
