"""An XSS corpus carried by agent output, messages, feedback, inputs and recipe fields:
nothing executes in Chromium, on any page that shows them."""

import json

import pytest

from runs import services
from runs.actor import Actor
from tests.conftest import pending_gate, wait_for, wait_run

from .conftest import log_in

MARK = "window.__xss = (window.__xss || 0) + 1"
CORPUS = [
    f"<script>{MARK}</script>",
    f'<img src=x onerror="{MARK}">',
    f'<svg onload="{MARK}"><circle r=1 /></svg>',
    f'<iframe srcdoc="<script>parent.{MARK}</script>"></iframe>',
    f'<a href="javascript:{MARK}">click</a>',
    f"[markdown link](javascript:{MARK})",
    f'![markdown image](x" onerror="{MARK})',
    f'<details open ontoggle="{MARK}">x</details>',
    f'"><script>{MARK}</script>',
    f"'><img src=x onerror={MARK}>",
    f'<body onload="{MARK}">',
    f'<math><mtext><table><mglyph><style><img src=x onerror="{MARK}">',
    f'<object data="javascript:{MARK}"></object>',
    f'<embed src="javascript:{MARK}">',
    f'<form action="javascript:{MARK}"><button>go</button></form>',
    f'<input autofocus onfocus="{MARK}">',
    f"<style>@import 'javascript:{MARK}';</style>",
    f'<div style="background:url(javascript:{MARK})">x</div>',
    f'<meta http-equiv="refresh" content="0;url=javascript:{MARK}">',
    f'<base href="javascript:{MARK}//">',
    f"</textarea><script>{MARK}</script>",
    f"</title><script>{MARK}</script>",
    f'<noscript><p title="</noscript><img src=x onerror={MARK}>">',
    f"{{{{ {MARK} }}}} {{% {MARK} %}}",
    "<scr<script>ipt>alert(1)</scr</script>ipt>",
]
PAYLOAD = "\n\n".join(CORPUS)


def recipe_source() -> str:
    text = json.dumps(PAYLOAD)  # a valid YAML double-quoted scalar
    return f"""name: xss
description: {text}
interactive: true
providers:
  echo: {{kind: command, command: "cat"}}
provider: echo
inputs:
  note: {{type: textarea, label: {text}}}
nodes:
  - id: echo
    loop:
      prompt: "$USER_MESSAGE $INPUTS.note"
      until: NEVER_SAID
      max_iterations: 3
      interactive: true
      gate_message: {text}
"""


OPEN_ALL_AND_SETTLE = """async () => {
  const toggled = [...document.querySelectorAll("details")].filter(d => !d.open).map(d =>
    new Promise(done => { d.addEventListener("toggle", done, {once: true}); d.open = true; }));
  const images = [...document.images].filter(i => !i.complete).map(i =>
    new Promise(done => { i.addEventListener("load", done); i.addEventListener("error", done); }));
  await Promise.all([...toggled, ...images]);
  await new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)));
}"""


@pytest.mark.browser
def test_nothing_in_the_corpus_executes(live_worker, console_server, page, make_recipe, operator):
    recipe = make_recipe(recipe_source(), slug="xss")
    run = services.start_run(
        recipe, actor=Actor.operator(operator, "console"), message=PAYLOAD, inputs={"note": PAYLOAD}
    )
    wait_run(run, "paused")
    gate = wait_for(lambda: pending_gate(run), 30)
    services.approve(
        gate.pk, Actor.operator(operator, "console"), comment=PAYLOAD
    )  # feedback is shown too
    wait_for(lambda: run.gates.filter(status="pending").exclude(pk=gate.pk).exists(), 30)

    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, console_server, "otto")
    for path in [
        "/",
        f"/runs/{run.pk}/",
        "/runs/",
        "/recipes/",
        "/recipes/xss/",
        "/recipes/xss/start/",
    ]:
        page.goto(console_server + path)
        page.wait_for_load_state("networkidle")
        # Open every <details> and wait for its toggle event (a planted ontoggle would have
        # run by then, before ours), and for every image to load or fail (onerror): the
        # events themselves, not a guess at how long they take.
        page.evaluate(OPEN_ALL_AND_SETTLE)
        assert page.evaluate("window.__xss || 0") == 0, path
        assert page.locator("script:not([src])").count() == 0, path
        for attribute in ("onerror", "onload", "ontoggle", "onfocus"):
            assert page.locator(f"[{attribute}]").count() == 0, (path, attribute)
        assert page.locator("[href^='javascript:' i], [src^='javascript:' i]").count() == 0, path
    # The text is still there for the reviewer to read, as text.
    page.goto(console_server + f"/runs/{run.pk}/")
    assert "onerror" in page.content()
    assert dialogs == []
