import pytest
from django.test import Client


@pytest.fixture
def staff_editor(editor):
    """An editor with the admin and the shell role: the recipes edited here run bash (plain
    editors' limits are in tests/security/test_shell_permission.py)."""
    from django.contrib.auth.models import Group

    editor.is_staff = True
    editor.save()
    editor.groups.add(Group.objects.get(name="recipe author with shell"))
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
