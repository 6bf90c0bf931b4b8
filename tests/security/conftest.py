"""The engine, run in this process (tests/kernel/conftest.py), for the end-to-end tests here."""

from tests.kernel.conftest import broker  # noqa: F401 - a fixture
