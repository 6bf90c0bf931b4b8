"""The inbound webhooks' one URL: `/hooks/<key>`, answered in JSON (triggers.webhooks).

No session and no CSRF token: a delivery proves itself by its signature. The view reads
at most LOOP_WEBHOOK_MAX_BYTES and one byte more of the body, and none of it when the
request declares more: an oversize delivery costs no more memory than that."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from . import webhooks


@csrf_exempt
def receive_webhook(request, key: str):
    if request.method != "POST":
        return JsonResponse(
            {"detail": "A webhook takes POST deliveries only."},
            status=405,
            headers={"Allow": "POST"},
        )
    answer = webhooks.receive(key, request.headers, _body(request))
    return JsonResponse(answer.body(), status=answer.status, headers=answer.headers())


def _body(request) -> bytes:
    """What the view reads of the body: nothing when its declared length is over the limit,
    else at most the limit and one byte more (request.read, never request.body, which would
    read it all first)."""
    if webhooks.too_large(request.headers, b""):
        return b""
    return request.read(settings.LOOP_WEBHOOK_MAX_BYTES + 1)
