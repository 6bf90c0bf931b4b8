from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class RecipesConfig(AppConfig):
    name = "recipes"

    def ready(self):
        from recipes.validation import refresh_verdicts

        # A recipe's verdict depends on the providers it can reach (recipes.validation).
        for name, signal in (("saved", post_save), ("deleted", post_delete)):
            signal.connect(
                refresh_verdicts, sender="runs.ProviderConfig", dispatch_uid=f"verdicts-{name}"
            )
