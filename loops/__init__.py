"""The four kinds of loop, side by side: each a Django app with its format, runtime,
models, templates, URLs, API router, `loop` subcommands and tasks (docs/architecture.md)."""
