"""Templates of step-machine recipes: Jinja2's sandboxed environment, nothing else.

No loader (so no `{% include %}`, `{% import %}` or `{% extends %}`: refused when the
recipe is validated), no attribute escape hatches (the sandbox), and a name that is not
defined is an error when printed — `{% if inputs.task_key %}` on a missing input is simply
false, and `default(...)` works as in Jinja.

Gate commands are rendered differently (`render_command`): every value a template prints
travels in the environment and the command reads it from there (`runs.engine.shell_context`
decides how, by where the value stands), so no value becomes shell text.

Pure Python: the recipe format validates with it, the runner renders with it.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass

from jinja2 import TemplateSyntaxError, Undefined, nodes
from jinja2.exceptions import SecurityError, TemplateError, UndefinedError
from jinja2.sandbox import SandboxedEnvironment

from runs.engine.shell_context import check_script, plan
from runs.engine.shell_kinds import SAFE, Context, explain

__all__ = [
    "Namespace",
    "RenderError",
    "command_sources",
    "render",
    "render_command",
    "shell_check",
    "syntax_problems",
    "whole_value",
]

MAX_RENDERED = 1_000_000
# `**` and `*` of whole numbers: a result longer than this many bits (about 30,000 decimal
# digits) is refused before it is computed. Python cannot even print an integer of more
# than 4,300 digits, so nothing a template may print is lost.
MAX_INTEGER_BITS = 100_000


class RenderError(Exception):
    """A template could not be rendered; the message says why, in the author's terms."""


class ClearUndefined(Undefined):
    """Falsy in tests and `default()`, an error when printed or used."""

    __slots__ = ()

    def _fail_with_undefined_error(self, *args, **kwargs):
        owner = self._undefined_obj
        name = self._undefined_name
        if isinstance(owner, Namespace) and name is not None:
            known = ", ".join(sorted(owner)) or "none"
            raise UndefinedError(f"{owner._label}.{name} is undefined (known: {known})")
        if self._undefined_hint:
            raise UndefinedError(self._undefined_hint)
        raise UndefinedError(f"{name!r} is undefined" if name else "a value is undefined")

    def __str__(self) -> str:
        owner = self._undefined_obj
        if isinstance(owner, Namespace) and self._undefined_name in owner._optional:
            return ""  # a value the design says is there "if provided": absent prints nothing
        return self._fail_with_undefined_error()

    __iter__ = _fail_with_undefined_error
    __len__ = _fail_with_undefined_error


class Namespace:
    """Values templates read with dots (`inputs.goal`), named in error messages. Not a
    dict: an input called `items` or `keys` must read the input, not a dict method."""

    __slots__ = ("_label", "_optional", "_values")

    def __init__(self, label: str, values: dict, optional: frozenset[str] = frozenset()):
        """`optional`: names that print as nothing when absent (still undefined to
        `default()` and `{% if %}`); any other absent name is an error when printed."""
        self._label = label
        self._values = dict(values)
        self._optional = optional

    def __getattr__(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str):
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __contains__(self, name) -> bool:
        return name in self._values

    def __str__(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self._values.items())


class TextList(list):
    """A list that prints as one item per line (`{{ knowledge.files }}`)."""

    def __str__(self) -> str:
        return "\n".join(f"- {item}" for item in self)


class BoundedEnvironment(SandboxedEnvironment):
    """The sandbox, with `*` and `**` sized before they run: `'a' * 100000000` or
    `9 ** 9 ** 9` would allocate (or compute) for seconds before the length of the rendered
    text could refuse it."""

    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context, operator, left, right):
        problem = _repeat_problem(left, right) if operator == "*" else _power_problem(left, right)
        if problem:
            raise SecurityError(problem)
        return super().call_binop(context, operator, left, right)


def _whole(value) -> bool:
    return isinstance(value, int)  # bool included: True * 'a' repeats too


def _repeat_problem(left, right) -> str | None:
    """Why `left * right` is refused, or None: a text or list repeated past the limit of a
    rendered text, or whole numbers whose product is too long to be of use."""
    for sequence, count in ((left, right), (right, left)):
        if isinstance(sequence, (str, list, tuple)) and _whole(count):
            size = len(sequence) * max(count, 0)
            if size > MAX_RENDERED:
                what, unit = (
                    ("text", "characters") if isinstance(sequence, str) else ("list", "items")
                )
                return (
                    f"repeating a {what} {count:,} times would make {size:,} {unit}, more "
                    f"than the {MAX_RENDERED:,} a rendered text may have"
                )
            return None
    if _whole(left) and _whole(right):
        bits = abs(left).bit_length() + abs(right).bit_length()
        if bits > MAX_INTEGER_BITS:
            return f"a product of about {bits:,} bits is larger than templates may compute"
    return None


def _power_problem(base, exponent) -> str | None:
    """Why `base ** exponent` is refused, or None: estimated from the base's bit length
    times the exponent, before anything is computed."""
    if not (_whole(base) and _whole(exponent)) or exponent <= 1 or abs(base) <= 1:
        return None  # a float (it overflows at once), a root, or a result of one or zero
    # |base| >= 2: at least `exponent` bits (checked first, so the float below cannot overflow)
    bits = exponent if exponent > MAX_INTEGER_BITS else math.ceil(math.log2(abs(base)) * exponent)
    if bits > MAX_INTEGER_BITS:
        return (
            f"{base:,} ** {exponent:,} would have about {bits:,} bits, more than the "
            f"{MAX_INTEGER_BITS:,} templates may compute"
        )
    return None


def _environment(**options) -> SandboxedEnvironment:
    return BoundedEnvironment(
        undefined=ClearUndefined,
        autoescape=False,
        trim_blocks=True,
        keep_trailing_newline=True,
        **options,
    )


_ENV = _environment()
_FORBIDDEN = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)
_FORBIDDEN_NAMES = {
    nodes.Include: "include",
    nodes.Import: "import",
    nodes.FromImport: "import",
    nodes.Extends: "extends",
}


@dataclass(frozen=True)
class TemplateProblem:
    line: int  # 1-based line inside the template
    message: str


def syntax_problems(source: str) -> list[TemplateProblem]:
    """Syntax errors and refused tags of a template, each with its line in the template."""
    try:
        tree = _ENV.parse(source)
    except TemplateSyntaxError as exc:
        return [TemplateProblem(exc.lineno or 1, f"template syntax: {exc.message}")]
    found = []
    for node in tree.find_all(_FORBIDDEN):
        tag = _FORBIDDEN_NAMES[type(node)]
        found.append(
            TemplateProblem(
                node.lineno or 1,
                f"{{% {tag} %}} is not available: recipe templates cannot read files",
            )
        )
    return found


def render(source: str, context: dict) -> str:
    """Render a prompt or a branch name. Raises RenderError with a readable message."""
    try:
        text = _ENV.from_string(source).render(context)
    except TemplateSyntaxError as exc:
        raise RenderError(f"template syntax, line {exc.lineno}: {exc.message}") from None
    except SecurityError as exc:
        raise RenderError(f"refused by the template sandbox: {exc}") from None
    except UndefinedError as exc:
        raise RenderError(str(exc)) from None
    except TemplateError as exc:
        raise RenderError(f"template error: {exc}") from None
    except (TypeError, ValueError, ArithmeticError, LookupError) as exc:
        raise RenderError(f"template error: {type(exc).__name__}: {exc}") from None
    if len(text) > MAX_RENDERED:
        raise RenderError(f"the rendered text is longer than {MAX_RENDERED:,} characters")
    return text


# --- gate commands --------------------------------------------------------------------------

# A printed value becomes this marker while the command is rendered; the markers are then
# turned into references to environment variables. NUL cannot occur in a value that reaches
# the environment, nor in recipe text (the YAML reader refuses it), so it cannot be forged.
_MARK = "\x00{}\x00"
PRINTED = "{{ … }}"
_MARK_RE = re.compile("\x00(\\d+)\x00")
_PRINT = re.compile(r"\{\{.*?\}\}", re.S)
_TAG = re.compile(r"\{%.*?%\}", re.S)


def _render_value(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class Command:
    """A rendered gate command: a bash script with its values in `env`, or — when the whole
    command is one value — that value as a program and its arguments (`argv`)."""

    script: str = ""
    env: dict | None = None
    argv: list[str] | None = None

    @property
    def shown(self) -> str:
        """The command as the log shows it."""
        return shlex.join(self.argv) if self.argv is not None else self.script


def render_command(source: str, context: dict) -> Command:
    """Render a gate command with every printed value kept out of the script text."""
    values: list[str] = []

    def finalize(value):
        values.append(_render_value(value).replace("\x00", ""))
        return _MARK.format(len(values))

    env = _environment(finalize=finalize)
    try:
        text = env.from_string(source).render(context)
    except (TemplateError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        raise RenderError(
            str(exc) if isinstance(exc, UndefinedError) else f"template error: {exc}"
        ) from None
    marks = list(_MARK_RE.finditer(text))
    if whole_value(source) and len(marks) == 1 and text.strip() == marks[0].group(0):
        # `{{ inputs.gate_command }}`: the value is a command line, run as a program and its
        # arguments (no shell: pipes, `;`, `$( )` and redirections are plain words).
        value = values[int(marks[0].group(1)) - 1]
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise RenderError(f"the command {value!r} cannot be read: {exc}") from None
        if not argv:
            raise RenderError("the command is empty")
        return Command(argv=argv)
    # Each marker becomes a `$LOOP_V_n` reference first, so the shell lexer can say where
    # it stands; then it is written for that place, as substitute_shell does.
    script = _MARK_RE.sub(lambda m: f"$LOOP_V_{m.group(1)}", text)
    found = list(re.finditer(r"\$LOOP_V_(\d+)", script))
    contexts, findings = plan(script, [(m.start(), m.end()) for m in found])
    if findings:
        first = findings[0]
        raise RenderError(f"line {first.line}: {first.explanation}")
    parts, out_env, pos = [], {}, 0
    for match, context in zip(found, contexts, strict=True):
        if context not in SAFE:
            line = script.count("\n", 0, match.start()) + 1
            raise RenderError(f"line {line}: {explain(PRINTED, context)}")
        parts.append(script[pos : match.start()])
        pos = match.end()
        name = f"LOOP_V_{match.group(1)}"
        out_env[name] = values[int(match.group(1)) - 1]
        if context is Context.COMMENT:
            parts.append("")
        elif context is Context.BARE:
            parts.append(f'"${{{name}}}"')
        else:
            parts.append(f"${{{name}}}")
    parts.append(script[pos:])
    return Command(script="".join(parts), env=out_env)


def whole_value(source: str) -> bool:
    """The command is one printed expression and nothing else (`{{ inputs.test_cmd }}`)."""
    stripped = source.strip()
    found = _PRINT.fullmatch(stripped)
    return bool(found) and not _TAG.search(stripped)


def shell_check(source: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(errors, warnings) as (line, message): values a gate command would place where no
    substitution is safe (single quotes, arithmetic, eval, ...), and places worth a warning
    (a value that could pose as an option): checked when the recipe is validated."""
    if whole_value(source):
        return [], []  # one value, run as a program and its arguments without a shell
    probe = _TAG.sub("", _PRINT.sub("$USER_MESSAGE", source))
    findings, notices = check_script(probe)
    errors = [(f.line, explain(PRINTED, f.context)) for f in findings]
    warnings = [(n.line, n.explanation.replace("$USER_MESSAGE", PRINTED)) for n in notices]
    return errors, warnings


def command_sources(source: str) -> tuple[set[str], set[str]]:
    """(input names, other top-level names) a template reads: `inputs.x` gives x; any other
    variable (runtime, knowledge, ...) is named in the second set."""
    try:
        tree = _ENV.parse(source)
    except TemplateSyntaxError:
        return set(), set()
    inputs: set[str] = set()
    others: set[str] = set()
    for node in tree.find_all(nodes.Getattr):
        if isinstance(node.node, nodes.Name) and node.node.name == "inputs":
            inputs.add(node.attr)
    for node in tree.find_all(nodes.Getitem):
        if (
            isinstance(node.node, nodes.Name)
            and node.node.name == "inputs"
            and isinstance(node.arg, nodes.Const)
        ):
            inputs.add(str(node.arg.value))
    for node in tree.find_all(nodes.Name):
        if node.ctx == "load" and node.name != "inputs":
            others.add(node.name)
    return inputs, others
