"""A token per persona and a client that speaks JSON with it."""

import json

import pytest
from django.test import Client

from console.models import ApiToken


class ApiClient:
    """Django's test client with a bearer token and JSON bodies."""

    def __init__(self, secret: str | None = None):
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {secret}"} if secret else {}

    def call(self, method: str, path: str, body=None, raw: str | None = None, **params):
        data = raw if raw is not None else (json.dumps(body) if body is not None else "")
        kwargs = {"headers": self.headers}
        if method != "get":
            # An empty JSON request, as `curl -X POST` sends it, when there is no body.
            kwargs.update(data=data, content_type="application/json")
        if params:
            kwargs["query_params"] = params
        response = getattr(self.client, method)(path, **kwargs)
        response.body = response.json() if response.content else None
        return response

    def get(self, path, **params):
        return self.call("get", path, **params)

    def post(self, path, body=None, **kw):
        return self.call("post", path, body, **kw)

    def put(self, path, body=None, **kw):
        return self.call("put", path, body, **kw)


def client_for(user) -> ApiClient:
    _, secret = ApiToken.issue(user, name="tests")
    return ApiClient(secret)


@pytest.fixture
def anonymous():
    return ApiClient()


@pytest.fixture
def as_viewer(viewer):
    return client_for(viewer)


@pytest.fixture
def as_operator(operator):
    return client_for(operator)


@pytest.fixture
def as_editor(editor):
    return client_for(editor)


@pytest.fixture
def as_outsider(outsider):
    return client_for(outsider)
