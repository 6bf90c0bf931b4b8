"""`manage.py unlock_login`: an administrator lifts a sign-in lock (console/throttle.py)
without waiting for its window to end, where the counters are shared (Redis); where they
live in the web server's memory, the command says so and what to do instead."""

import uuid
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.core.management import CommandError, call_command
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


def unlock(*args) -> str:
    out = StringIO()
    call_command("unlock_login", *args, stdout=out)
    return out.getvalue()


def lock_out(username: str, address: str, failures: int) -> Client:
    client = Client(REMOTE_ADDR=address)
    for _ in range(failures):
        client.post("/accounts/login/", {"username": username, "password": "wrong"})
    return client


def signs_in(client: Client, username: str) -> bool:
    client.post("/accounts/login/", {"username": username, "password": f"pw-{username}"})
    return SESSION_KEY in client.session


def test_unlock_login_lifts_an_accounts_lock(viewer):
    address = f"test-{uuid.uuid4().hex}"
    client = lock_out("vera", address, settings.LOOP_LOGIN_FAILURES_PER_ACCOUNT)
    assert not signs_in(client, "vera")  # locked, even with the right password

    said = unlock("Vera")  # the name as typed at the login page: case does not matter
    assert "account 'Vera': 5 failed sign-ins forgotten; the lock is lifted" in said
    assert signs_in(Client(REMOTE_ADDR=address), "vera")
    assert "account 'vera': no failed sign-ins counted" in unlock("vera")


def test_unlock_login_lifts_an_addresss_lock(viewer, operator):
    address = f"test-{uuid.uuid4().hex}"
    names = [f"nobody-{n}" for n in range(settings.LOOP_LOGIN_FAILURES_PER_ADDRESS)]
    client = Client(REMOTE_ADDR=address)
    for name in names:  # one failure each: only the address reaches its limit
        client.post("/accounts/login/", {"username": name, "password": "wrong"})
    assert not signs_in(client, "otto")

    said = unlock("--address", address)
    assert f"address {address}: 30 failed sign-ins forgotten; the lock is lifted" in said
    assert signs_in(Client(REMOTE_ADDR=address), "otto")
    for name in names:
        unlock(name)


def test_unlock_login_needs_an_account_or_an_address(db):
    with pytest.raises(CommandError, match="Name the account"):
        unlock()


@override_settings(
    CACHES={
        **settings.CACHES,
        "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }
)
def test_where_the_lock_is_in_the_web_servers_memory_it_says_what_to_do(db):
    """The embedded default (no REDIS_URL): the counters are in the web process's memory,
    out of this process's reach."""
    with pytest.raises(CommandError) as refused:
        unlock("vera")
    words = str(refused.value)
    assert "kept in the web server's memory" in words and "restart" in words


def test_a_redis_that_does_not_answer_is_said_not_shown_as_a_traceback(db, monkeypatch):
    from redis.exceptions import ConnectionError as RedisDown

    from console import throttle

    def down(*args):
        raise RedisDown("Connection refused")

    monkeypatch.setattr(throttle, "kept_in_process_memory", lambda: False)
    monkeypatch.setattr(throttle, "lift", down)
    with pytest.raises(CommandError, match="did not answer .*nothing was lifted"):
        unlock("vera")
