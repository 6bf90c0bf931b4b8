"""Guessing passwords: after a few failures an account (or an address) is locked for a
while, on the console's login page and the admin's, with a message saying so."""

import time
import uuid

import pytest
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.backends import BaseBackend
from django.core.cache import caches
from django.test import Client

from console.throttle import _keys

pytestmark = pytest.mark.django_db


@pytest.fixture
def address():
    """A client address of this test's own, so counters never leak between tests."""
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture(autouse=True)
def forget_account_counters():
    yield
    for name in ("vera", "otto", "ada"):
        key = _keys(None, name)[0][0]
        caches["throttle"].delete_many([key, key + ":until"])


def sign_in(client, username, password, path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password})


def test_an_account_locks_after_repeated_failures_with_a_clear_message(viewer, address):
    client = Client(REMOTE_ADDR=address)
    for _ in range(settings.LOOP_LOGIN_FAILURES_PER_ACCOUNT):
        wrong = sign_in(client, "vera", "not-the-password")
        assert wrong.status_code == 200
        assert "didn&#x27;t match" in wrong.content.decode()

    locked = sign_in(client, "vera", "pw-vera")  # even the right password
    assert locked.status_code == 200
    assert SESSION_KEY not in client.session
    html = locked.content.decode()
    assert "Too many failed sign-in attempts. Please wait 15 minutes and try again." in html

    # From another address too: the account is what is locked.
    elsewhere = Client(REMOTE_ADDR=address + "9")
    assert "Too many failed" in sign_in(elsewhere, "vera", "pw-vera").content.decode()


def test_other_accounts_are_not_locked_and_success_resets_the_count(viewer, operator, address):
    client = Client(REMOTE_ADDR=address)
    for _ in range(settings.LOOP_LOGIN_FAILURES_PER_ACCOUNT):
        sign_in(client, "vera", "nope")
    assert sign_in(client, "otto", "pw-otto").status_code == 302

    other = Client(REMOTE_ADDR=address + "1")
    for _ in range(settings.LOOP_LOGIN_FAILURES_PER_ACCOUNT - 1):
        sign_in(other, "otto", "nope")
    assert sign_in(other, "otto", "pw-otto").status_code == 302
    # The count started again after that success.
    for _ in range(settings.LOOP_LOGIN_FAILURES_PER_ACCOUNT - 1):
        sign_in(other, "otto", "nope")
    assert sign_in(other, "otto", "pw-otto").status_code == 302


class Clock:
    """Stands for the `time` module where the throttle and the in-memory cache read the
    time: it moves only when the test moves it."""

    def __init__(self):
        self.now = time.time()

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(settings, monkeypatch):
    """The throttle's counters in an in-memory cache of this test's own, the cache's expiry
    and the throttle's windows both on a clock the test moves: a window ends without
    waiting for it in wall-clock time."""
    settings.CACHES = {
        **settings.CACHES,
        "throttle": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": f"throttle-{uuid.uuid4().hex}",
        },
    }
    clock = Clock()
    for module in (
        "console.throttle",
        "django.core.cache.backends.base",
        "django.core.cache.backends.locmem",
    ):
        monkeypatch.setattr(f"{module}.time", clock)
    return clock


def test_the_lock_ends_when_its_window_does(viewer, address, settings, clock):
    settings.LOOP_LOGIN_LOCKOUT_SECONDS = 5
    settings.LOOP_LOGIN_FAILURES_PER_ACCOUNT = 1
    client = Client(REMOTE_ADDR=address)
    sign_in(client, "vera", "nope")
    assert "Please wait a minute" in sign_in(client, "vera", "pw-vera").content.decode()

    clock.now += 4.5  # still within the window
    assert "Please wait a minute" in sign_in(client, "vera", "pw-vera").content.decode()
    clock.now += 1  # past its end
    assert sign_in(client, "vera", "pw-vera").status_code == 302


def test_one_address_guessing_many_accounts_is_locked(db, address, settings):
    settings.LOOP_LOGIN_FAILURES_PER_ADDRESS = 4
    client = Client(REMOTE_ADDR=address)
    for number in range(4):
        sign_in(client, f"guess{number}", "nope")
    html = sign_in(client, "someone-else", "nope").content.decode()
    assert "Too many failed sign-in attempts" in html


def test_the_admin_signs_in_through_the_same_throttled_backend(admin_user, address, settings):
    """The admin's login sends people to the console's page; any other password check goes
    through the throttled backend as well."""
    from django.contrib.auth import load_backend

    checking = [  # the backends that check a password (ProjectBackend only answers has_perm)
        path
        for path in settings.AUTHENTICATION_BACKENDS
        if type(load_backend(path)).authenticate is not BaseBackend.authenticate
    ]
    assert checking == ["console.throttle.ThrottledModelBackend"]
    client = Client(REMOTE_ADDR=address)
    for _ in range(settings.LOOP_LOGIN_FAILURES_PER_ACCOUNT):
        client.post("/admin/login/", {"username": "ada", "password": "nope"}, follow=True)
        sign_in(client, "ada", "nope")
    locked = client.post("/admin/login/", {"username": "ada", "password": "pw-ada"}, follow=True)
    assert SESSION_KEY not in client.session
    assert "Too many failed sign-in attempts" in sign_in(client, "ada", "pw-ada").content.decode()
    assert locked.status_code == 200
