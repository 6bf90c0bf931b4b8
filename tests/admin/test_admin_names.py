"""The README and docs name an admin page as the admin shows it: one name for one idea
(the newcomer review: the README said "Providers", the admin "Provider configs")."""

import re

from django.contrib import admin

from runs.models import ProviderConfig
from tests.test_docs_links import DOCS


def test_the_docs_name_the_provider_admin_as_the_admin_does():
    shown = str(ProviderConfig._meta.verbose_name_plural).capitalize()
    assert ProviderConfig in admin.site._registry and shown == "Provider configs"
    texts = {path.name: re.sub(r"\s+", " ", path.read_text()) for path in DOCS}
    assert shown in texts["README.md"] and shown in texts["providers.md"]
    other = re.compile(r"admin \((?:\*\*)?(?:Admin → )?(?:Runs → )?Providers\b")
    assert not [name for name, text in texts.items() if other.search(text)]


def test_messages_name_the_provider_admin_as_the_admin_does():
    """Errors that send a person to the admin name its page as the admin shows it."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sources = [
        path
        for folder in ("console", "loops", "recipes", "runs", "notifications")
        for path in (root / folder).rglob("*.py")
    ]
    wrong = [str(p.relative_to(root)) for p in sources if "admin (Providers)" in p.read_text()]
    assert not wrong
