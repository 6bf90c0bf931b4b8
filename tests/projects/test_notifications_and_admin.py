"""Projects on the surfaces that reach people outside the pages: notifications, decision
links, Slack, the Django admin and /metrics. Two projects, Alpha and Beta; people who hold
a role in Alpha only. Nothing of Beta reaches them: no delivery, no link, no decision, no
admin row (Beta's rows answer 404, as ids that do not exist) and no metrics series.

Runs go through the kernel in this process (what the kernel sends is run here, in order);
mail goes to a real SMTP server on 127.0.0.1 and Slack's Web API is a scripted server on
127.0.0.1 (tests/notifications)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from console.models import ApiToken, Membership, Project
from notifications import links
from notifications.models import DecisionLink, Delivery, SlackUser, Subscription
from runs import services
from runs.actor import ENGINE
from runs.models import GateResponse, ProviderConfig, Run
from tests.notifications.smtp import mailbox_fixture  # noqa: F401 - `mailbox`
from tests.notifications.test_slack import (
    CHANNEL,
    SIGNING_SECRET,
    TOKEN,
    SlackApi,
    button,
    press,
    press_body,
)
from triggers.models import Schedule

pytestmark = pytest.mark.django_db(transaction=True)

GATED = """
name: {name}
nodes:
  - id: decide
    approval:
      message: Go on?
      decisions: [{{id: ship, label: Ship}}, {{id: hold, label: Hold}}]
"""


@pytest.fixture
def world(make_recipe):
    """Alpha and Beta, each with a recipe whose run waits at a gate."""
    found = SimpleNamespace(
        alpha=Project.objects.create(name="Alpha", slug="alpha"),
        beta=Project.objects.create(name="Beta", slug="beta"),
    )
    for project in (found.alpha, found.beta):
        recipe = make_recipe(GATED.format(name=f"{project.slug} gate"), slug=f"{project.slug}-gate")
        recipe.project = project
        recipe.save()
        setattr(found, f"{project.slug}_recipe", recipe)
    return found


def waiting_run(world, slug: str, drain):
    """A run of `slug`'s recipe, waiting at its gate: (run, gate)."""
    run = services.start_run(getattr(world, f"{slug}_recipe"), ENGINE, message=f"{slug} work")
    drain()
    return run, services.pending_gate(run)


def member(django_user_model, name: str, project, role: str, **extra):
    user = django_user_model.objects.create_user(
        name, email=f"{name}@example.com", password="pw", **extra
    )
    Membership.objects.create(project=project, user=user, role=role)
    return user


# --- notifications ----------------------------------------------------------------------


def test_a_project_s_subscription_hears_nothing_of_another_project(world, in_process):
    alpha_channel = Subscription.objects.create(
        name="alpha channel", channel="email", email="alpha@example.com", project=world.alpha
    )
    beta_run, _ = waiting_run(world, "beta", in_process)
    assert not Subscription.listening("gate_waiting", beta_run).filter(pk=alpha_channel.pk)
    assert not Delivery.objects.filter(subscription=alpha_channel).exists()
    alpha_run, _ = waiting_run(world, "alpha", in_process)
    [heard] = Delivery.objects.filter(subscription=alpha_channel)
    assert (heard.run_id, heard.event, heard.status) == (alpha_run.pk, "gate_waiting", "delivered")


def test_a_person_of_one_project_hears_nothing_of_another(
    world, in_process, django_user_model, mailbox
):
    vera = member(django_user_model, "vera", world.alpha, "viewer")
    mine = Subscription.objects.create(name="all I may see", channel="email", user=vera)
    beta_run, _ = waiting_run(world, "beta", in_process)
    assert not Subscription.listening("gate_waiting", beta_run).filter(pk=mine.pk)
    alpha_run, _ = waiting_run(world, "alpha", in_process)
    assert [d.run_id for d in Delivery.objects.filter(subscription=mine)] == [alpha_run.pk]
    [mail] = mailbox.to("vera@example.com")
    assert f"Run {alpha_run.pk} (alpha-gate)" in mail["Subject"]
    assert "beta" not in mailbox.text_to("vera@example.com")
    # A viewer is mailed no decision links: deciding is the operator's.
    assert not DecisionLink.objects.filter(recipient=vera).exists()


def test_an_escalation_mails_only_who_may_decide_in_the_run_s_project(
    world, in_process, django_user_model
):
    from notifications.events import escalation_recipients

    otto = member(django_user_model, "otto", world.alpha, "operator")
    olga = member(django_user_model, "olga", world.beta, "operator")
    alpha_run, _ = waiting_run(world, "alpha", in_process)
    beta_run, _ = waiting_run(world, "beta", in_process)
    assert escalation_recipients(["otto", "olga"], alpha_run) == [otto]
    assert escalation_recipients(["otto", "olga"], beta_run) == [olga]


# --- decision links -----------------------------------------------------------------------


def confirm(path: str):
    """Open the link's page and press Confirm (CSRF enforced, as a browser would)."""
    client = Client(enforce_csrf_checks=True)
    page = client.get(path)
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    if token is None:
        return page
    return client.post(path, {"csrfmiddlewaretoken": token.group(1).decode(), "text": ""})


def test_a_link_is_made_only_where_its_person_operates_and_refused_once_they_leave(
    world, in_process, django_user_model
):
    otto = member(django_user_model, "otto", world.alpha, "operator")
    _, alpha_gate = waiting_run(world, "alpha", in_process)
    _, beta_gate = waiting_run(world, "beta", in_process)
    assert links.links_for(beta_gate, otto) == []
    assert not DecisionLink.objects.filter(gate=beta_gate).exists()

    made = dict((choice["id"], url) for choice, url in links.links_for(alpha_gate, otto))
    assert sorted(made) == ["hold", "reject", "ship"]
    Membership.objects.filter(user=otto, project=world.alpha).delete()
    path = made["ship"].split("://", 1)[1].split("/", 1)[1]
    refused = confirm("/" + path)
    assert refused.status_code == 403
    text = refused.content.decode()
    assert "You may no longer decide" in text and "operator role in this run" in text
    posted = Client().post("/" + path, {"text": ""})
    assert posted.status_code == 403
    alpha_gate.refresh_from_db()
    assert alpha_gate.is_pending and not GateResponse.objects.filter(gate=alpha_gate).exists()
    assert DecisionLink.objects.get(gate=alpha_gate, decision="ship").used_at is None


def test_a_link_decides_for_an_operator_of_the_project(world, in_process, django_user_model):
    otto = member(django_user_model, "otto", world.alpha, "operator")
    _, alpha_gate = waiting_run(world, "alpha", in_process)
    made = dict((choice["id"], url) for choice, url in links.links_for(alpha_gate, otto))
    path = "/" + made["ship"].split("://", 1)[1].split("/", 1)[1]
    assert confirm(path).status_code == 200
    alpha_gate.refresh_from_db()
    assert (alpha_gate.decision, alpha_gate.decider, alpha_gate.surface) == ("ship", "otto", "link")


# --- Slack ------------------------------------------------------------------------------------


@pytest.fixture
def slack(settings):
    with SlackApi() as api:
        settings.LOOP_SLACK_API_URL = api.url
        settings.LOOP_SLACK_BOT_TOKEN = TOKEN
        settings.LOOP_SLACK_SIGNING_SECRET = SIGNING_SECRET
        yield api


def test_a_slack_press_by_someone_who_only_views_the_project_decides_nothing(
    world, in_process, slack, client, django_user_model
):
    Subscription.objects.create(
        name="alpha releases", channel="slack", slack_channel=CHANNEL, project=world.alpha
    )
    _, gate = waiting_run(world, "alpha", in_process)
    [message] = slack.called("chat.postMessage")
    # Vera views Alpha and operates Beta: the operator role somewhere is not enough.
    vera = member(django_user_model, "vera", world.alpha, "viewer")
    Membership.objects.create(project=world.beta, user=vera, role="operator")
    SlackUser.objects.create(user=vera, slack_user_id="U0VERA")
    answer = press(client, press_body(button(message["blocks"], "ship"), user="U0VERA"))
    assert answer.status_code == 200
    said = answer.content.decode()
    assert said == (
        "vera does not hold the operator role in this run's project. Nothing was decided."
    )
    [told] = slack.called("chat.postEphemeral")
    assert (told["user"], told["text"]) == ("U0VERA", said)
    gate.refresh_from_db()
    assert gate.is_pending and not GateResponse.objects.filter(gate=gate).exists()
    assert slack.called("chat.update") == []

    otto = member(django_user_model, "otto", world.alpha, "operator")
    SlackUser.objects.create(user=otto, slack_user_id="U0OTTO")
    body = press_body(button(message["blocks"], "ship"), user="U0OTTO", action_ts="2.0")
    assert press(client, body).content.decode() == "You decided Ship."


# --- the admin --------------------------------------------------------------------------------


@pytest.fixture
def rows(world):
    """In each project: a run, a provider, a subscription and a schedule."""
    made = {}
    for slug in ("alpha", "beta"):
        project, recipe = getattr(world, slug), getattr(world, f"{slug}_recipe")
        made[slug] = {
            "recipe": recipe,
            "run": Run.objects.create(
                recipe=recipe, recipe_version=recipe.current_version, status="completed"
            ),
            "providerconfig": ProviderConfig.objects.create(
                name=f"{slug}-agent", kind="demo", project=project
            ),
            "subscription": Subscription.objects.create(
                name=f"{slug} mail", channel="email", email=f"{slug}@example.com", project=project
            ),
            "schedule": Schedule.objects.create(
                recipe=recipe, name=f"{slug} nightly", cron="0 3 * * *", enabled=False
            ),
        }
    made["shared"] = ProviderConfig.objects.create(name="shared-agent", kind="demo")
    return made


ADMIN_PATHS = {
    "recipe": "/admin/recipes/recipe/",
    "run": "/admin/runs/run/",
    "providerconfig": "/admin/runs/providerconfig/",
    "subscription": "/admin/notifications/subscription/",
    "schedule": "/admin/triggers/schedule/",
}


@pytest.fixture
def alpha_staff(world, django_user_model):
    """An editor of Alpha with the admin, who may also handle providers and subscriptions
    (model permissions no project role grants)."""
    user = member(django_user_model, "adam", world.alpha, "editor", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            codename__in=[
                "view_providerconfig",
                "change_providerconfig",
                "add_providerconfig",
                "view_subscription",
                "change_subscription",
                "add_subscription",
            ]
        )
    )
    browser = Client()
    browser.force_login(user)
    return browser


@pytest.mark.parametrize("model", list(ADMIN_PATHS))
def test_the_admin_shows_a_project_s_staff_member_only_that_project(model, rows, alpha_staff):
    listing = ADMIN_PATHS[model]
    mine, theirs = rows["alpha"][model], rows["beta"][model]
    page = alpha_staff.get(listing)
    assert page.status_code == 200
    text = page.content.decode()
    assert f"{listing}{mine.pk}/change/" in text
    assert f"{listing}{theirs.pk}/change/" not in text
    assert "beta" not in text.lower()  # not in a row, a filter or a count
    assert alpha_staff.get(f"{listing}{mine.pk}/change/").status_code == 200
    # Another project's row answers as an id that does not exist (a delete page first asks
    # for the right to delete at all: 403 for both without it).
    for action, status in (("change", 404), ("history", 404), ("delete", (403, 404))):
        hidden = alpha_staff.get(f"{listing}{theirs.pk}/{action}/")
        missing = alpha_staff.get(f"{listing}999999/{action}/")
        assert hidden.status_code == missing.status_code, action
        assert hidden.status_code in (status if isinstance(status, tuple) else (status,))


def test_a_shared_provider_is_seen_by_every_project_s_staff(rows, alpha_staff):
    text = alpha_staff.get(ADMIN_PATHS["providerconfig"]).content.decode()
    assert f"/admin/runs/providerconfig/{rows['shared'].pk}/change/" in text


def test_the_admin_s_forms_offer_only_the_member_s_projects_and_recipes(rows, alpha_staff, world):
    for path in (
        "/admin/recipes/recipe/add/",
        "/admin/triggers/schedule/add/",
        "/admin/triggers/webhook/add/",
        "/admin/runs/providerconfig/add/",
        "/admin/notifications/subscription/add/",
    ):
        form = alpha_staff.get(path)
        assert form.status_code == 200, path
        text = form.content.decode()
        assert "beta" not in text.lower(), path
    refused = alpha_staff.post(
        "/admin/triggers/schedule/add/",
        {
            "recipe": world.beta_recipe.pk,
            "name": "sneaky",
            "cron": "0 3 * * *",
            "timezone": "UTC",
            "concurrency": "skip",
            "inputs": "{}",
            "budget": "{}",
            "firings-TOTAL_FORMS": "0",
            "firings-INITIAL_FORMS": "0",
        },
    )
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert not Schedule.objects.filter(name="sneaky").exists()
    # A subscription of every project is not theirs to make.
    blank = alpha_staff.post(
        "/admin/notifications/subscription/add/",
        {"name": "all", "channel": "email", "email": "all@example.com", "secret": "k"},
    )
    assert blank.status_code == 200 and not Subscription.objects.filter(name="all").exists()


def test_the_recipe_page_offers_to_edit_triggers_only_where_the_person_edits(
    world, django_user_model
):
    vera = member(django_user_model, "vera", world.alpha, "viewer", is_staff=True)
    Membership.objects.create(project=world.beta, user=vera, role="editor")
    browser = Client()
    browser.force_login(vera)
    alpha_page = browser.get(f"/recipes/{world.alpha_recipe.slug}/").content.decode()
    assert "add a schedule" not in alpha_page and "(editors set them up)" in alpha_page
    beta_page = browser.get(f"/recipes/{world.beta_recipe.slug}/").content.decode()
    assert "add a schedule" in beta_page


def test_the_admin_asks_for_the_shell_role_in_the_recipe_s_own_project(world, django_user_model):
    """Sam writes shell in Beta only: in Alpha, an editor's limits hold."""
    sam = member(django_user_model, "sam", world.alpha, "editor", is_staff=True)
    Membership.objects.create(project=world.beta, user=sam, role="recipe author with shell")
    browser = Client()
    browser.force_login(sam)

    def add_shell(recipe):
        return browser.post(
            f"/admin/recipes/recipe/{recipe.pk}/change/",
            {
                "project": recipe.project_id,
                "enabled": "on",
                "source": recipe.source + "  - id: greet\n    bash: echo hi\n",
                "note": "",
            },
        )

    refused = add_shell(world.alpha_recipe)
    assert refused.status_code == 200 and "recipe author with shell" in refused.content.decode()
    assert world.alpha_recipe.versions.count() == 1
    assert add_shell(world.beta_recipe).status_code == 302
    assert world.beta_recipe.versions.count() == 2


def test_the_project_admin_lists_members(rows, world, client, admin_user, django_user_model):
    from console.models import AuditEvent

    newcomer = django_user_model.objects.create_user("nina", password="pw")
    client.force_login(admin_user)
    page = client.get(f"/admin/console/project/{world.alpha.pk}/change/")
    assert page.status_code == 200 and "memberships-TOTAL_FORMS" in page.content.decode()
    saved = client.post(
        f"/admin/console/project/{world.alpha.pk}/change/",
        {
            "name": "Alpha",
            "slug": "alpha",
            "description": "",
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "0",
            "memberships-0-user": newcomer.pk,
            "memberships-0-role": "operator",
        },
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert Membership.objects.get(user=newcomer).project == world.alpha
    # Recorded once (console.audit records every membership saved, the admin's too).
    assert AuditEvent.objects.filter(kind="membership_changed", project=world.alpha).count() == 1


# --- /metrics --------------------------------------------------------------------------------


def series(text: str) -> list:
    return [s for f in text_string_to_metric_families(text) for s in f.samples]


def test_metrics_for_a_token_limited_to_a_project_show_none_of_another(rows, client, admin_user):
    token, secret = ApiToken.issue(admin_user, name="alpha scraper", scope="metrics")
    token.projects.set([rows["alpha"]["recipe"].project])
    scraped = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert scraped.status_code == 200
    text = scraped.content.decode()
    labelled = [s for s in series(text) if "project" in s.labels]
    assert labelled and {s.labels["project"] for s in labelled} == {"alpha"}
    assert "beta" not in text
    runs = {s.labels["status"]: s.value for s in labelled if s.name == "loop_runs"}
    assert runs["completed"] == 1
    # Unlimited, the same administrator's scrape has both, each under its own label.
    _, every = ApiToken.issue(admin_user, name="scraper", scope="metrics")
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {every}").content.decode()
    both = {s.labels.get("project") for s in series(text) if s.name == "loop_runs"}
    assert {"alpha", "beta"} <= both


def test_metrics_for_a_member_of_one_project_show_only_it(rows, client, world, django_user_model):
    otto = member(django_user_model, "otto", world.alpha, "operator")
    _, secret = ApiToken.issue(otto, name="otto's scraper", scope="metrics")
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {secret}").content.decode()
    assert {s.labels["project"] for s in series(text) if "project" in s.labels} == {"alpha"}
    assert "beta" not in text
