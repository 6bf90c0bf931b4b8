"""A lease keeper's thread outlives a dropped database connection: the beat after the
failure opens a new connection instead of failing until the lease lapses (the fault
matrix's dropped connections struck a driven host's keeper this way)."""

from __future__ import annotations

import threading

from django.db import connection

from runs.executor.lease import keep_lease


def test_a_beat_after_a_dropped_connection_reconnects(transactional_db):
    answers, third_beat = [], threading.Event()

    def renew() -> bool:
        if not answers:
            connection.ensure_connection()
            connection.connection.close()  # the server side went away under this thread
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                answers.append(cursor.fetchone()[0])
        except Exception:
            answers.append("dropped")
            raise
        if len(answers) >= 3:
            third_beat.set()
        return True

    with keep_lease(renew, every=0.01):
        assert third_beat.wait(60), answers
    assert answers[0] == "dropped" and answers[1:3] == [1, 1], answers
