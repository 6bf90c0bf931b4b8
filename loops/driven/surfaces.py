"""What driven loops show on the kernel's surfaces (their `LoopKind`, loops/driven/kind.py): the
loop pages, the read-only loops API, and the run page's panel of a driven run's loops."""

from __future__ import annotations

from runs.kinds import RunPart

from . import api, queries, urls

URLS = urls.urlpatterns
API_ROUTER = api.router
API_PREFIX = "/loops"  # /api/loops, /api/loops/{id}

# The run page's panel (its root is <section id="driven-loops">), redrawn when the host's
# crumbs arrive or an iteration moves.
RUN_PARTS = {
    "driven-loops": RunPart(
        "loops/_run_loops.html", queries.run_panel, refresh_on="loops-changed iterations-changed"
    )
}
