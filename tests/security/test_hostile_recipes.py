"""The hostile recipe corpus through every surface that accepts recipe source: a clear error
with a line number, never a 500, in bounded time and memory."""

import time
import tracemalloc
from pathlib import Path

import pytest

from console.models import ApiToken
from recipes.loader import load_recipe

CORPUS = sorted((Path(__file__).parent.parent / "recipes" / "corpus").glob("*.yaml"))


def test_the_corpus_has_at_least_40_recipes():
    assert len(CORPUS) >= 40


@pytest.mark.django_db
def test_api_validate_answers_every_file_with_lines(client, editor):
    _, secret = ApiToken.issue(editor, name="hostile")
    headers = {"Authorization": f"Bearer {secret}"}
    for path in CORPUS:
        source = path.read_bytes().decode("utf-8", errors="replace")
        started = time.monotonic()
        response = client.post(
            "/api/recipes/validate",
            {"source": source},
            content_type="application/json",
            headers=headers,
        )
        assert response.status_code in (200, 422), (path.name, response.status_code)
        assert time.monotonic() - started < 5, path.name
        if response.status_code == 200:
            body = response.json()
            assert body["valid"] is False, path.name
            assert any(e["line"] for e in body["errors"]), path.name


@pytest.mark.django_db
def test_creating_a_hostile_recipe_is_refused_with_its_line(client, editor):
    _, secret = ApiToken.issue(editor, name="hostile")
    headers = {"Authorization": f"Bearer {secret}"}
    for number, path in enumerate(CORPUS):
        source = path.read_bytes().decode("utf-8", errors="replace")
        response = client.post(
            "/api/recipes",
            {"slug": f"hostile-{number}", "source": source},
            content_type="application/json",
            headers=headers,
        )
        assert response.status_code == 422, (path.name, response.status_code)
        # NUL characters are refused before parsing, by name; everything else with its line.
        expected = "nul characters" if "\x00" in source else "line"
        assert expected in response.content.decode().lower(), path.name


@pytest.mark.django_db
def test_the_admin_refuses_hostile_sources_without_a_500(client, admin_user):
    client.force_login(admin_user)
    for number, path in enumerate(CORPUS[:45]):
        source = path.read_bytes().decode("utf-8", errors="replace").replace("\x00", "")
        response = client.post(
            "/admin/recipes/recipe/add/",
            {
                "slug": f"hostile-{number}",
                "name": "h",
                "source": source,
                "kind": "workflow",
                "origin": "console",
                "enabled": "on",
            },
        )
        assert response.status_code == 200, (path.name, response.status_code)  # form re-shown
        assert "line" in response.content.decode().lower(), path.name


def test_memory_stays_bounded_on_bombs():
    for name in ("billion_laughs.yaml", "alias_bomb_in_nodes.yaml", "deep_alias_nesting.yaml"):
        source = (CORPUS[0].parent / name).read_text()
        tracemalloc.start()
        result = load_recipe(source)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert not result.ok
        assert peak < 50 * 1024 * 1024, (name, peak)
