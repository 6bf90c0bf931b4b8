"""Webhook signatures: HMAC-SHA256 over `<timestamp>.<body>` with the subscription's secret.

The receiver recomputes it from the two headers and the raw body (docs/operations.md has
the snippet it can copy); the timestamp lets it refuse an old message replayed later."""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Loop-Signature"
TIMESTAMP_HEADER = "X-Loop-Timestamp"
EVENT_HEADER = "X-Loop-Event"
DELIVERY_HEADER = "X-Loop-Delivery"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signed_headers(secret: str, timestamp: str, body: bytes) -> dict[str, str]:
    return {
        SIGNATURE_HEADER: signature(secret, timestamp, body),
        TIMESTAMP_HEADER: timestamp,
    }
