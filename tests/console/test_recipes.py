"""Recipe list, recipe page (source, problems, graph, versions), and the Start-run form."""

import pytest
from django.urls import reverse

from recipes.models import Recipe
from runs import services
from runs.actor import Actor
from runs.models import Run
from tests.console.conftest import login

pytestmark = pytest.mark.django_db

TYPED = """
name: typed
inputs:
  title: {type: text, label: Title, required: true}
  notes: {type: textarea, description: Anything else}
  dry_run: {type: boolean, label: Dry run, default: true}
  size: {type: select, options: [small, large], default: small}
  count: {type: number, default: 2}
nodes:
  - id: hello
    bash: echo hi
"""


def test_list_shows_kind_version_validity(client, viewer, bundled):
    body = login(client, viewer).get(reverse("recipe_list")).content.decode()
    assert "guided-refine" in body and "v1" in body and "valid" in body
    # Each kind by the name its kind gives itself, not its stored word (`planeai`).
    assert "<td>Workflow</td>" in body and "<td>Step machine</td>" in body
    assert "<td>planeai</td>" not in body
    assert "Start run" not in body


def test_operator_sees_start_links(client, operator, bundled):
    body = login(client, operator).get(reverse("recipe_list")).content.decode()
    assert reverse("recipe_start", args=["guided-refine"]) in body


def test_detail_shows_source_graph_and_versions(client, viewer, bundled):
    body = (
        login(client, viewer)
        .get(reverse("recipe_detail", args=["writer-reviewer"]))
        .content.decode()
    )
    assert 'id="L1"' in body and "name: Writer and reviewer" in body
    assert "draft-loop" in body and "Body, repeated each iteration" in body
    assert '<code class="node-id">review</code>' in body
    assert "v1" in body and "(current)" in body


def test_detail_lists_problems(client, viewer, make_recipe):
    recipe = make_recipe(
        "name: warn\nnodes:\n  - id: a\n    bash: echo\n    surprise: 1\n", slug="warn"
    )
    Recipe.objects.filter(pk=recipe.pk).update(
        valid=False,
        problems={
            "errors": [{"path": "nodes[0]", "line": 3, "message": "bad <b>"}],
            "warnings": [],
        },
    )
    body = login(client, viewer).get(reverse("recipe_detail", args=["warn"])).content.decode()
    assert 'href="#L3"' in body and "bad &lt;b&gt;" in body


def test_start_form_has_typed_fields(client, operator, make_recipe):
    make_recipe(TYPED, slug="typed")
    body = login(client, operator).get(reverse("recipe_start", args=["typed"])).content.decode()
    assert 'name="input_title"' in body and 'type="text"' in body
    assert '<textarea name="input_notes"' in body and "Anything else" in body
    assert 'type="checkbox" name="input_dry_run"' in body and "checked" in body
    assert '<select name="input_size"' in body and 'type="number" name="input_count"' in body


def test_start_validates_beside_the_field(client, operator, make_recipe):
    make_recipe(TYPED, slug="typed")
    response = login(client, operator).post(
        reverse("recipe_start", args=["typed"]),
        {"message": "m", "input_title": "", "input_count": "many", "input_size": "small"},
    )
    body = response.content.decode()
    assert response.status_code == 200 and Run.objects.count() == 0
    assert "title: this input is required" in body and "count: must be a number" in body


def test_start_creates_the_run_and_redirects(client, operator, make_recipe):
    make_recipe(TYPED, slug="typed")
    response = login(client, operator).post(
        reverse("recipe_start", args=["typed"]),
        {"message": "go", "input_title": "T", "input_count": "3.5", "input_size": "large"},
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response.url == run.get_absolute_url()
    assert run.inputs == {
        "title": "T",
        "notes": "",
        "dry_run": False,
        "size": "large",
        "count": 3.5,
    }
    assert run.message == "go" and run.started_by == operator


def test_start_on_a_disabled_recipe_says_why(client, operator, bundled):
    Recipe.objects.filter(slug="counter-loop").update(enabled=False)
    response = login(client, operator).post(
        reverse("recipe_start", args=["counter-loop"]), {"message": "go"}
    )
    assert response.status_code == 200 and "is disabled" in response.content.decode()


def test_viewer_cannot_start(client, viewer, bundled):
    client = login(client, viewer)
    assert client.get(reverse("recipe_start", args=["counter-loop"])).status_code == 403
    assert client.post(reverse("recipe_start", args=["counter-loop"])).status_code == 403


def test_outsider_is_forbidden(client, outsider, bundled):
    client = login(client, outsider)
    assert client.get(reverse("recipe_list")).status_code == 403
    assert client.get(reverse("recipe_detail", args=["counter-loop"])).status_code == 403


def test_unknown_recipe_is_404(client, operator):
    client = login(client, operator)
    assert client.get(reverse("recipe_detail", args=["nope"])).status_code == 404
    assert client.get(reverse("recipe_start", args=["nope"])).status_code == 404


def test_wrong_methods_are_405(client, operator, bundled):
    client = login(client, operator)
    assert client.post(reverse("recipe_list")).status_code == 405
    assert client.post(reverse("recipe_detail", args=["counter-loop"])).status_code == 405
    assert client.put(reverse("recipe_start", args=["counter-loop"])).status_code == 405


def test_pages_read_the_cached_spec_of_the_version(client, operator, make_recipe):
    from recipes.validation import validate_source
    from runs.executor import spec

    recipe = make_recipe(TYPED, slug="typed")
    spec._load.cache_clear()
    client = login(client, operator)
    assert "Title" in client.get(reverse("recipe_start", args=["typed"])).content.decode()
    assert "hello" in client.get(reverse("recipe_detail", args=["typed"])).content.decode()
    info = spec._load.cache_info()
    assert (info.misses, info.hits) == (1, 1)  # parsed once, for the version, then reused

    # A new version is a new cache entry: the page shows what the version says.
    from recipes.editing import save_source

    changed = TYPED.replace("label: Title", "label: Headline")
    assert validate_source(changed).ok
    save_source(recipe, changed)
    assert "Headline" in client.get(reverse("recipe_start", args=["typed"])).content.decode()
    assert spec._load.cache_info().misses == 2


def test_list_names_each_recipe_once_and_renders_its_description(client, viewer, make_recipe):
    make_recipe(
        "name: same\ndescription: Runs `make test` until **green**. <script>x()</script>\n"
        "nodes:\n  - id: a\n    bash: echo\n",
        slug="same",
    )
    make_recipe("name: Pretty name\nnodes:\n  - id: a\n    bash: echo\n", slug="pretty")
    body = login(client, viewer).get(reverse("recipe_list")).content.decode()
    assert body.count(">same<") == 1  # the name; the slug equals it and is not repeated
    assert '<code class="muted">pretty</code>' in body  # a slug that differs is shown
    assert "<code>make test</code>" in body and "<strong>green</strong>" in body
    assert "`" not in body.split("<table>")[1].split("</table>")[0]
    assert "<script>x()" not in body
    # A long description is shortened at a word, never in the middle of one.
    words = " ".join(f"word{n:02d}" for n in range(40))
    make_recipe(
        f"name: long\ndescription: {words}\nnodes:\n  - id: a\n    bash: echo\n", slug="long"
    )
    body = login(client, viewer).get(reverse("recipe_list")).content.decode()
    assert "word23 …" in body and "word24" not in body


def test_versions_link_to_their_diff(client, viewer, make_recipe):
    from recipes.editing import save_source

    recipe = make_recipe("name: v\nnodes:\n  - id: a\n    bash: echo one\n", slug="v")
    save_source(recipe, "name: v\nnodes:\n  - id: a\n    bash: echo <two>\n")
    client = login(client, viewer)
    body = client.get(reverse("recipe_detail", args=["v"])).content.decode()
    url = reverse("recipe_diff", args=["v"]) + "?a=1&amp;b=2"
    assert url in body
    diff = client.get(url.replace("&amp;", "&")).content.decode()
    assert '<span class="d-del">-    bash: echo one</span>' in diff
    assert '<span class="d-add">+    bash: echo &lt;two&gt;</span>' in diff
    assert "1 line(s) added, 1 removed" in diff
    assert client.get(reverse("recipe_diff", args=["v"]) + "?a=x&b=99").status_code == 200


def test_pages_link_the_favicon(client, viewer, bundled):
    body = login(client, viewer).get(reverse("recipe_list")).content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in body
    # A client asking for the classic name (no login needed) is sent to the same icon.
    client.logout()
    answer = client.get("/favicon.ico")
    assert answer.status_code == 301 and answer["Location"] == "/static/favicon.svg"


def test_start_form_refuses_an_empty_message_when_the_recipe_uses_it(client, operator, bundled):
    client = login(client, operator)
    url = reverse("recipe_start", args=["counter-loop"])  # its prompt uses $USER_MESSAGE
    page = client.get(url).content.decode()
    assert 'name="message"' in page and "required" in page.split('name="message"')[1].split(">")[0]
    runs_before = Run.objects.count()
    response = client.post(url, {"message": "   "})
    assert response.status_code == 200
    assert "write what the run is about" in response.content.decode()
    assert Run.objects.count() == runs_before


def test_start_form_allows_an_empty_message_when_the_recipe_does_not_use_it(
    client, operator, bundled
):
    response = login(client, operator).post(
        reverse("recipe_start", args=["release-approval"]), {"message": ""}
    )
    assert response.status_code == 302


def test_start_form_counts_the_message_and_refuses_a_long_one_in_its_own_words(
    client, operator, bundled
):
    client = login(client, operator)
    url = reverse("recipe_start", args=["counter-loop"])
    page = client.get(url).content.decode()
    box = page.split('name="message"')[1].split(">")[0]
    # No silent cut: the box counts (static/js/console-gate.js) and never truncates.
    assert "maxlength" not in box and 'data-limit="100000"' in box
    assert 'aria-describedby="message-limit id_message_helptext"' in box
    assert 'id="message-limit"' in page and "Up to 100,000 characters." in page
    too_long = "x" * 100_001
    response = client.post(url, {"message": too_long})
    body = response.content.decode()
    assert response.status_code == 200 and not Run.objects.exists()
    assert "The message is 100,001 characters; the limit is 100,000." in body
    assert "Ensure this value" not in body
    assert too_long in body  # what was typed comes back in the box
    # A line break is one character, as the counter counts it (browsers send CRLF).
    response = client.post(url, {"message": "x" * 99_998 + "\r\ny"})
    assert response.status_code == 302 and len(Run.objects.get().message) == 100_000


def test_start_form_keeps_the_message_when_it_refuses(client, operator, bundled):
    response = login(client, operator).post(
        reverse("recipe_start", args=["counter-loop"]),
        {"message": "keep <me>", "budget_iterations": "\u0663"},
    )
    body = response.content.decode()
    assert response.status_code == 200 and not Run.objects.exists()
    assert "keep &lt;me&gt;</textarea>" in body


@pytest.mark.parametrize(
    "value, words",
    [
        ("\u0663", "Iterations: must be written with the digits 0-9, not '\u0663'"),
        ("lots", "Iterations: must be a whole number above 0, not 'lots'"),
    ],
)
def test_budget_errors_read_the_same_on_the_start_form_and_the_run_page(
    client, operator, bundled, value, words
):
    client = login(client, operator)
    response = client.post(
        reverse("recipe_start", args=["counter-loop"]),
        {"message": "go", "budget_iterations": value},
    )
    start_form = response.content.decode().replace("&#x27;", "'")
    assert words in start_form and "budget.iterations" not in start_form
    run = services.start_run(
        bundled["counter-loop"], actor=Actor.operator(operator, "console"), message="go"
    )
    page = client.post(
        reverse("run_budget", args=[run.pk]), {"iterations": value}, headers={"HX-Request": "true"}
    )
    assert words in page.content.decode().replace("&#x27;", "'")


def test_start_form_of_an_invalid_recipe_shows_its_problems_and_no_form(
    client, operator, make_recipe
):
    recipe = make_recipe("name: broken\nnodes:\n  - id: a\n    bash: echo\n", slug="broken")
    Recipe.objects.filter(pk=recipe.pk).update(
        valid=False,
        problems={
            "errors": [{"path": "nodes[0]", "line": 3, "message": "bad <b>"}],
            "warnings": [],
        },
    )
    client = login(client, operator)
    url = reverse("recipe_start", args=["broken"])
    for response in [client.get(url), client.post(url, {"message": "go"})]:
        body = response.content.decode()
        assert response.status_code == 200 and not Run.objects.exists()
        assert "has errors; fix it before starting a run" in body
        assert "bad &lt;b&gt;" in body and "line 3" in body
        assert 'id="start-form"' not in body and "Start run</button>" not in body
        assert reverse("recipe_detail", args=["broken"]) in body
