"""A project's provider accounts and its shell right hold in that project only: a run of
project Alpha cannot call Beta's account (it is, to Alpha, one that is not configured),
each project may have its own default, and a person who writes shell in Alpha but edits
in Beta writes no shell into Beta's recipes — on the API, the admin's import, the one save
path and a run's start."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from console.models import Membership, Project
from loops.stepmachine.demo import FEATURE_BRANCH
from recipes import editing
from recipes.models import Recipe
from runs import services
from runs.actor import ENGINE
from runs.models import ProviderConfig, Run
from runs.providers import registry
from tests.api.conftest import client_for
from tests.conftest import wait_run
from tests.stepmachine.test_start import demo_repository

ASKS = "name: asks {slug}\nnodes:\n  - id: ask\n    prompt: hello\n    provider: {provider}\n"
WITH_SHELL = "name: builds\nprovider: demo\nnodes:\n  - id: build\n    bash: echo building\n"
NO_SHELL = "name: talks\nprovider: demo\nnodes:\n  - id: talk\n    prompt: hello\n"


@pytest.fixture
def alpha(db):
    return Project.objects.create(name="Alpha", slug="alpha")


@pytest.fixture
def beta(db):
    return Project.objects.create(name="Beta", slug="beta")


@pytest.fixture
def beta_account(beta):
    return ProviderConfig.objects.create(name="beta-account", kind="demo", project=beta)


@pytest.mark.usefixtures("live_worker")
def test_a_run_calls_only_its_projects_accounts(make_recipe, alpha, beta, beta_account):
    mine = make_recipe(ASKS.format(slug="b", provider="beta-account"), slug="b", project=beta)
    theirs = make_recipe(ASKS.format(slug="a", provider="beta-account"), slug="a", project=alpha)
    done = wait_run(services.start_run(mine, ENGINE, message="go"), "completed", "failed")
    assert done.status == "completed", done.error
    refused = wait_run(services.start_run(theirs, ENGINE, message="go"), "completed", "failed")
    assert refused.status == "failed"
    said = refused.error + " ".join(refused.nodes.values_list("error", flat=True))
    assert "provider 'beta-account' is not configured" in said
    assert not refused.iterations.filter(output__contains="demo").exists()


def test_validation_reads_the_accounts_the_recipes_project_may_use(alpha, beta, beta_account):
    assert registry.unresolvable("beta-account", beta.pk) is None
    assert registry.unresolvable("beta-account", alpha.pk) == (
        "provider 'beta-account' is not configured"
    )
    ProviderConfig.objects.create(name="shared", kind="demo")
    assert registry.unresolvable("shared", alpha.pk) is None


def test_each_project_has_its_own_default_else_the_shared_one(alpha, beta):
    shared = ProviderConfig.objects.create(name="house", kind="demo", is_default=True)
    first = ProviderConfig.objects.create(name="b1", kind="demo", project=beta, is_default=True)
    assert ProviderConfig.objects.default_in(alpha.pk) == shared
    assert ProviderConfig.objects.default_in(beta.pk) == first
    second = ProviderConfig.objects.create(name="b2", kind="demo", project=beta, is_default=True)
    first.refresh_from_db()
    shared.refresh_from_db()
    assert not first.is_default and shared.is_default  # a new default retires its own only
    assert ProviderConfig.objects.default_in(beta.pk) == second
    assert ProviderConfig.objects.default_in(None) == shared  # no run: the shared one
    assert registry.default_configured(alpha.pk)


@pytest.fixture
def writes_shell_in_alpha_only(django_user_model, alpha, beta):
    user = django_user_model.objects.create_user("split", password="pw")
    Membership.objects.create(project=alpha, user=user, role="recipe author with shell")
    Membership.objects.create(project=beta, user=user, role="editor")
    return user


def test_the_api_writes_shell_only_in_the_project_that_allows_it(writes_shell_in_alpha_only):
    api = client_for(writes_shell_in_alpha_only)
    refused = api.post("/api/recipes", {"source": WITH_SHELL, "project": "beta", "slug": "x"})
    assert refused.status_code == 403 and "recipe author with shell" in refused.body["detail"]
    assert not Recipe.objects.filter(slug="x").exists()
    made = api.post("/api/recipes", {"source": WITH_SHELL, "project": "alpha", "slug": "y"})
    assert made.status_code == 201 and Recipe.objects.get(slug="y").project.slug == "alpha"
    talks = api.post("/api/recipes", {"source": NO_SHELL, "project": "beta", "slug": "z"})
    assert talks.status_code == 201
    changed = api.put("/api/recipes/z", {"source": NO_SHELL + "  - id: b\n    bash: id\n"})
    assert changed.status_code == 403
    assert Recipe.objects.get(slug="z").current_version.number == 1


def test_the_one_save_path_asks_the_recipes_project(writes_shell_in_alpha_only, beta, alpha):
    user = writes_shell_in_alpha_only
    with pytest.raises(editing.ShellNotAllowed):
        editing.create_recipe(WITH_SHELL, slug="in-beta", user=user, project=beta)
    talks, _ = editing.create_recipe(NO_SHELL, slug="talks", user=user, project=beta)
    with pytest.raises(editing.ShellNotAllowed):
        editing.save_source(talks, WITH_SHELL.replace("builds", "talks"), user=user)
    builds, _ = editing.create_recipe(WITH_SHELL, slug="in-alpha", user=user, project=alpha)
    copy = editing.duplicate(builds, user=user)
    assert copy.project == alpha  # a copy stays in its recipe's project


def test_the_admins_import_asks_the_chosen_project(writes_shell_in_alpha_only, beta):
    user = writes_shell_in_alpha_only
    user.is_staff = True
    user.save()
    browser = Client()
    browser.force_login(user)
    upload = SimpleUploadedFile("builds.yaml", WITH_SHELL.encode())
    page = browser.post(
        "/admin/recipes/recipe/import/", {"files": [upload], "project": beta.pk}, follow=True
    )
    assert page.status_code == 200
    assert not Recipe.objects.filter(slug="builds").exists()
    assert "recipe author with shell" in page.content.decode()


def test_a_start_checks_shell_inputs_in_the_recipes_project(
    writes_shell_in_alpha_only, bundled, alpha, beta
):
    browser = Client()
    browser.force_login(writes_shell_in_alpha_only)
    recipe = bundled["no-mistakes-demo"]
    for project in (beta, alpha):
        recipe.project = project
        recipe.save(update_fields=["project"])
        repository = unquote(demo_repository(browser))
        form = {
            "repository": repository,
            "input_branch": FEATURE_BRANCH,
            "input_target_branch": "main",
            "input_gate_command": "pytest -q",
        }
        page = browser.post("/recipes/no-mistakes-demo/start/", form)
        if project == beta:
            assert "needs the shell permission" in page.content.decode()
            assert not Run.objects.exists()
        else:
            assert page.status_code == 302
            assert Run.objects.get().inputs["gate_command"] == "pytest -q"
