"""Keep the server log readable: a refused request (403, 404, ...) is a line, not a
traceback; a traceback is for a server fault (5xx)."""

import logging


class NoTracebackForClientErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
