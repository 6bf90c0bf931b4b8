from tests.providers.conftest import (  # noqa: F401 - fixtures for this folder's tests
    fake_ai,
    fake_ai_server,
    start,
    test_key_env_allowed,
)
from tests.stepmachine.conftest import (  # noqa: F401 - the step machine's fixtures
    plane_recipe,
    waiting_run,
)
