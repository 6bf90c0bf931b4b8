#!/usr/bin/env python
"""Django's command-line utility for Loop Console (console.__main__ holds it, so that an
installed copy runs the same commands as `loop-console ...`)."""

if __name__ == "__main__":
    from console.__main__ import main

    main()
