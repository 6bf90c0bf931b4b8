import pytest
from django.test import Client


@pytest.fixture
def staff_editor(editor):
    editor.is_staff = True
    editor.save()
    return editor


@pytest.fixture
def editor_client(staff_editor):
    client = Client()
    client.force_login(staff_editor)
    return client


@pytest.fixture
def viewer_client(viewer):
    viewer.is_staff = True
    viewer.save()
    client = Client()
    client.force_login(viewer)
    return client
