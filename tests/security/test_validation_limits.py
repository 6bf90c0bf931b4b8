"""Validating a recipe costs web CPU: people without the editor role get a size limit and
a rate limit, each refused with a clear JSON error; editors keep the full size."""

import pytest
from django.core.cache import caches

from console.models import ApiToken
from tests.api.conftest import ApiClient
from tests.api.test_recipes_api import GOOD

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_viewer(viewer):
    _, secret = ApiToken.issue(viewer, name="limits")
    yield ApiClient(secret)
    key = f"validate:user:{viewer.pk}"
    caches["throttle"].delete_many([key, key + ":until"])


def padded(chars: int) -> str:
    return GOOD + "#" * (chars - len(GOOD))


def test_a_viewer_may_validate_up_to_the_size_limit(as_viewer, settings):
    most = settings.LOOP_VALIDATE_MAX_CHARS
    assert as_viewer.post("/api/recipes/validate", {"source": padded(most)}).status_code == 200
    refused = as_viewer.post("/api/recipes/validate", {"source": padded(most + 1)})
    assert refused.status_code == 413
    assert refused.body["detail"] == (
        f"Without the editor role a recipe to validate may have at most {most:,}"
        f" characters; this one has {most + 1:,}."
    )


def test_an_editor_validates_large_recipes(editor, settings):
    _, secret = ApiToken.issue(editor)
    big = padded(settings.LOOP_VALIDATE_MAX_CHARS * 3)
    response = ApiClient(secret).post("/api/recipes/validate", {"source": big})
    assert response.status_code == 200 and response.body["valid"] is True


def test_a_viewer_validating_in_a_loop_is_slowed_down(as_viewer, editor, settings):
    settings.LOOP_VALIDATE_PER_MINUTE = 3
    for _ in range(3):
        assert as_viewer.post("/api/recipes/validate", {"source": GOOD}).status_code == 200
    refused = as_viewer.post("/api/recipes/validate", {"source": GOOD})
    assert refused.status_code == 429
    assert refused.body["detail"].startswith(
        "Too many validations: at most 3 a minute without the editor role. Try again in"
    )
    # Others are not affected.
    _, secret = ApiToken.issue(editor)
    assert ApiClient(secret).post("/api/recipes/validate", {"source": GOOD}).status_code == 200
