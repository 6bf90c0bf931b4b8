"""The decisions' tests use the provider tests' scripted OpenAI-compatible API (importing
its fixtures sets the key variables the worker copies when it starts)."""

from tests.providers.conftest import (  # noqa: F401 - fixtures
    fake_ai,
    fake_ai_server,
    test_key_env_allowed,
)
