"""The regular expressions of ``match(pattern, text)``: Soufflé's dialect, matched by RE2.

Soufflé matches with C++ ``std::regex_match``: the ECMAScript grammar, the pattern against the
whole text. policyc reads the same patterns and runs them on RE2, which matches in time linear
in the text. :func:`translate` rewrites an ECMAScript pattern into RE2 syntax where the two
read the same text differently:

* ``.`` is any character but a line break (``\\n`` or ``\\r``), as in ECMAScript (RE2's ``.``
  takes ``\\r``); under RE2's ``(?s)`` flag it is any character;
* ``\\s`` and ``[[:s:]]`` include the vertical tab, as ``std::regex``'s ``isspace`` does;
* ``[[:d:]]``, ``[[:w:]]``, ``[[:s:]]`` (``std::regex``'s short class names), ``\\uXXXX``,
  ``\\cX``, ``\\0``, ``[\\b]`` (a backspace) and the collating element ``[[.x.]]`` / equivalence
  class ``[[=x=]]`` of one character become their RE2 spellings;
* ``[]`` matches nothing and ``[^]`` any character.

Everything else is passed to RE2 as written, so RE2's extensions, which ECMAScript does not
have, keep working: ``(?i)`` and the other flags, ``\\pL`` / ``\\pN`` (Unicode classes),
``\\A``, ``\\z``, ``\\Q...\\E``, ``[[:^alpha:]]``. What RE2 cannot do because it does not
backtrack is refused with the reason: backreferences (``\\1``) and lookaround (``(?=``,
``(?!``, ``(?<=``, ``(?<!``). A pattern is a :class:`PatternError` when it is longer than
:data:`MAX_PATTERN` characters, uses one of those, or RE2 refuses it.

>>> translate(r"[[:d:]]+\\.[^\\s]")
'[[:digit:]]+\\\\.[^[:space:]]'
>>> pattern_problem(r"(a)\\1")
'`\\\\1` is a backreference, which RE2 does not have (it matches in linear time, without backtracking)'
"""

from __future__ import annotations

import functools
import re
from typing import Any

MAX_PATTERN = 10_000  # characters of a regular expression
MAX_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern

# std::regex's class names that RE2 spells otherwise
_CLASS_NAMES = {"d": "digit", "w": "word", "s": "space"}
_FLAGS = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?([):])")
_NO_BACKTRACKING = "which RE2 does not have (it matches in linear time, without backtracking)"
_LOOKAROUND = {
    "(?=": "a lookahead",
    "(?!": "a negative lookahead",
    "(?<=": "a lookbehind",
    "(?<!": "a negative lookbehind",
}
_ALL = r"\x00-\x{10FFFF}"
POLICY, SOUFFLE = "policy", "souffle"  # the dialects: a policy's, Soufflé's (programs without verdicts)


class PatternError(ValueError):
    """A pattern ``match`` cannot use, and why; ``kind`` says whose limit it meets:
    ``"invalid"`` (not a regular expression of its dialect), ``"unsupported"`` (one RE2 cannot
    run: a backreference, lookaround, a repetition above 1,000) or ``"limit"`` (too long)."""

    def __init__(self, pattern: str, reason: str, kind: str = "invalid") -> None:
        super().__init__(f"invalid pattern {pattern!r}: {reason}")
        self.pattern = pattern
        self.reason = reason
        self.kind = kind


def _char(c: str) -> str:
    """One character as an RE2 escape that means it literally, in or out of a class."""
    return f"\\x{{{ord(c):X}}}"


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.dotall = [False]  # per open group: whether `.` takes line breaks (RE2's `(?s)`)

    all_characters = _ALL

    def fail(self, reason: str, kind: str = "invalid") -> PatternError:
        return PatternError(self.p, reason, kind)

    def run(self) -> str:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c == "\\":
                self.out.append(self.escape(in_class=False))
            elif c == "[":
                self.char_class()
            elif c == "(":
                self.group()
            elif c == ")":
                if len(self.dotall) > 1:
                    self.dotall.pop()
                self.out.append(c)
                self.i += 1
            elif c == ".":
                self.out.append("." if self.dotall[-1] else "[^\\n\\r]")
                self.i += 1
            else:
                self.out.append(c)
                self.i += 1
        return "".join(self.out)

    def escape(self, in_class: bool) -> str:
        """The RE2 text of the escape at ``self.i`` (a backslash), which it consumes."""
        p, i = self.p, self.i
        if i + 1 >= len(p):
            raise self.fail("it ends with a lone `\\`")
        c = p[i + 1]
        self.i = i + 2
        if c in "123456789":
            raise self.fail(f"`\\{c}` is a backreference, {_NO_BACKTRACKING}", "unsupported")
        if c == "0":
            if i + 2 < len(p) and p[i + 2].isdigit():
                raise self.fail(f"`\\0{p[i + 2]}`: octal escapes are not ECMAScript (write `\\x..`)")
            return "\\x00"
        if c in "sS":
            name = "space" if c == "s" else "^space"
            return f"[:{name}:]" if in_class else f"[[:{name}:]]"
        if c == "b" and in_class:
            return "\\x08"
        if c == "c":
            letter = p[i + 2] if i + 2 < len(p) else ""
            if not ("a" <= letter.lower() <= "z"):
                raise self.fail("`\\c` must be followed by a letter (`\\cJ` is a line feed)")
            self.i += 1
            return _char(chr(ord(letter) % 32))
        if c == "u":
            digits = p[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.fail("`\\u` must be followed by four hexadecimal digits")
            self.i += 4
            return f"\\x{{{digits}}}"
        if c == "Q":  # RE2's quoting: everything up to `\E` is literal
            end = p.find("\\E", self.i)
            end = len(p) if end < 0 else end
            quoted = p[self.i : end]
            self.i = min(end + 2, len(p))
            return "".join(_char(q) for q in quoted)
        if not c.isascii():
            return _char(c)
        return "\\" + c

    def char_class(self) -> None:
        p = self.p
        start = self.i
        self.i += 1
        negated = p.startswith("^", self.i)
        if negated:
            self.i += 1
        if p.startswith("]", self.i):  # ECMAScript: `[]` matches nothing, `[^]` anything
            self.i += 1
            everything = self.all_characters
            self.out.append(f"[{everything}]" if negated else f"[^{everything}]")
            return
        parts = ["[^" if negated else "["]
        while self.i < len(p) and p[self.i] != "]":
            c = p[self.i]
            if c == "\\":
                parts.append(self.escape(in_class=True))
            elif c == "[" and p[self.i + 1 : self.i + 2] in (":", ".", "="):
                parts.append(self.bracket_expression())
            elif c == "[":
                parts.append("\\[")
                self.i += 1
            else:
                parts.append(c)
                self.i += 1
        if self.i >= len(p):
            raise self.fail(f"the class opened at character {start + 1} has no closing `]`")
        self.i += 1
        parts.append("]")
        self.out.append("".join(parts))

    def bracket_expression(self) -> str:
        """``[:name:]``, ``[.x.]`` or ``[=x=]`` inside a class."""
        p, i = self.p, self.i
        kind = p[i + 1]
        end = p.find(kind + "]", i + 2)
        if end < 0:
            raise self.fail(f"`[{kind}` in a class has no closing `{kind}]`")
        name = p[i + 2 : end]
        self.i = end + 2
        if kind == ":":
            negated = name.startswith("^")
            bare = name.removeprefix("^")
            return f"[:{'^' if negated else ''}{_CLASS_NAMES.get(bare, bare)}:]"
        if len(name) != 1:
            what = "collating element" if kind == "." else "equivalence class"
            raise self.fail(
                f"the {what} `[{kind}{name}{kind}]` is not supported (only one character)", "unsupported"
            )
        return _char(name)

    def group(self) -> None:
        p, i = self.p, self.i
        for opener, what in _LOOKAROUND.items():
            if p.startswith(opener, i):
                raise self.fail(f"`{opener}` is {what}, {_NO_BACKTRACKING}", "unsupported")
        flags = _FLAGS.match(p, i)
        dotall = self.dotall[-1]
        if flags:
            on, off, close = flags.groups()
            dotall = ("s" in on or dotall) and "s" not in (off or "")
            if close == ")":
                self.dotall[-1] = dotall
            else:
                self.dotall.append(dotall)
            self.out.append(flags.group(0))
            self.i = flags.end()
            return
        self.dotall.append(dotall)
        self.out.append("(")
        self.i += 1


# std::regex's class names (C++ [re.traits], `lookup_classname`): RE2's others, such as
# `word` or `[:^alpha:]`, are errors of a Soufflé pattern
_STD_CLASSES = frozenset(
    {"alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper"}
    | {"xdigit", "d", "w", "s"}
)
# the letters RE2 gives a meaning after `\` that ECMAScript does not: in Soufflé each is itself
_RE2_ESCAPES = {
    "A": "the start of the text",
    "z": "the end of the text",
    "C": "any byte",
    "p": "a Unicode class",
    "P": "a negated Unicode class",
    "Q": "the start of a quoted text",
    "E": "the end of a quoted text",
    "a": "the bell character",
}
_INTERVAL = re.compile(r"\{[0-9]+(,[0-9]*)?\}")


class _SouffleTranslator(_Translator):
    r"""The pattern as Soufflé's ``std::regex`` reads it (ECMAScript, as GCC's library
    implements it), over the bytes of UTF-8 text (each a Latin-1 character here): an escape
    ECMAScript does not define is the character itself (``\p`` is ``p``, ``\cJ`` is ``J``),
    and what ECMAScript does not have is invalid (RE2's flags ``(?i)``, ``[[:^alpha:]]``,
    ``\x{41}``, a ``{`` that starts no repetition). ``notes`` lists where a pattern valid in
    both dialects reads differently in the policy dialect."""

    all_characters = r"\x00-\xFF"

    def __init__(self, pattern: str) -> None:
        super().__init__(pattern)
        self.notes: list[str] = []

    def run(self) -> str:
        p = self.p
        i = 0
        while True:  # `{` starts a repetition in std::regex, or is an error
            i = p.find("{", i)
            if i < 0:
                break
            if i == 0 or p[i - 1] != "\\":
                if not _INTERVAL.match(p, i):
                    raise self.fail("a `{` that does not start a repetition `{n}`, `{n,}` or `{n,m}`")
            i += 1
        return super().run()

    def escape(self, in_class: bool) -> str:
        p, i = self.p, self.i
        if i + 1 >= len(p):
            raise self.fail("it ends with a lone `\\`")
        c = p[i + 1]
        if c in "123456789sSbB" or c in "dDwWfnrtv":
            return super().escape(in_class)
        self.i = i + 2
        if c == "0":  # the character 0; a digit after it is a character of its own
            return "\\x00"
        if c == "c":
            if self.i >= len(p):
                raise self.fail("`\\c` at the end of the pattern")
            letter = p[self.i]
            self.i += 1
            self.notes.append(f"`\\c{letter}` is the character `{letter}` in Soufflé (GCC's std::regex)")
            return _char(letter)
        if c in "xu":
            width = 2 if c == "x" else 4
            digits = p[self.i : self.i + width]
            if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise self.fail(f"`\\{c}` must be followed by {width} hexadecimal digits")
            self.i += width
            return f"\\x{{{digits}}}"
        if c in _RE2_ESCAPES:
            self.notes.append(
                f"`\\{c}` is the character `{c}` in Soufflé (an escape ECMAScript does not define), "
                f"{_RE2_ESCAPES[c]} in RE2"
            )
        return _char(c)

    def bracket_expression(self) -> str:
        p, i = self.p, self.i
        if p[i + 1] == ":":
            end = p.find(":]", i + 2)
            if end >= 0 and p[i + 2 : end] not in _STD_CLASSES:
                raise self.fail(f"`[:{p[i + 2 : end]}:]` is not a class of std::regex")
        return super().bracket_expression()

    def group(self) -> None:
        p, i = self.p, self.i
        if p.startswith("(?", i) and not p.startswith(("(?:", "(?=", "(?!"), i):
            raise self.fail(f"ECMAScript has no group `{p[i : i + 3]}` (flags such as `(?i)` are RE2's)")
        super().group()


def _latin1(text: str) -> str:
    """The bytes of ``text`` in UTF-8, each as the Latin-1 character of its value."""
    return text.encode("utf-8").decode("latin-1")


def translate(pattern: str, dialect: str = POLICY) -> str:
    """The RE2 pattern that matches what ``pattern`` (of ``dialect``) matches: in the Soufflé
    dialect, over the bytes of the text in UTF-8 (see :func:`compile_pattern`)."""
    if len(pattern) > MAX_PATTERN:
        raise PatternError(
            pattern[:40] + "...",
            f"it has {len(pattern):,} characters, more than the {MAX_PATTERN:,} allowed",
            "limit",
        )
    if dialect == SOUFFLE:
        return _SouffleTranslator(_latin1(pattern)).run()
    return _Translator(pattern).run()


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str, dialect: str = POLICY) -> Any:
    """``pattern`` compiled by RE2, for a whole-text match (``fullmatch``). In the Soufflé
    dialect it matches bytes (the Latin-1 encoding of RE2): give it ``text.encode("utf-8")``."""
    import re2

    options = re2.Options()
    options.log_errors = False  # an invalid pattern is an error of its own, not a line on stderr
    options.max_mem = MAX_MEMORY
    text = translate(pattern, dialect)
    translated: str | bytes = text
    if dialect == SOUFFLE:
        options.encoding = re2.Options.Encoding.LATIN1
        translated = text.encode("latin-1")
    try:
        return re2.compile(translated, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(pattern, f"{reason} (RE2, which matches in linear time)", "unsupported") from None


def pattern_problem(pattern: str, dialect: str = POLICY) -> str | None:
    """Why ``match`` cannot use ``pattern``, or None when it can."""
    found = pattern_error(pattern, dialect)
    return None if found is None else found.reason


def pattern_error(pattern: str, dialect: str = POLICY) -> PatternError | None:
    """The :class:`PatternError` of ``pattern`` in ``dialect``, or None when it compiles."""
    try:
        compile_pattern(pattern, dialect)
    except PatternError as error:
        return error
    return None


def souffle_match(pattern: str, text: str) -> bool:
    r"""``match(pattern, text)`` as Soufflé answers it: the pattern read as ``std::regex``
    reads it, matched against the bytes of the text; a pattern Soufflé rejects, or RE2 cannot
    run, matches nothing (Soufflé warns and answers false).

    >>> souffle_match(r"\pL", "pL"), souffle_match("(?i)a", "a"), souffle_match("^.$", "é")
    (True, False, False)
    """
    try:
        compiled = compile_pattern(pattern, SOUFFLE)
    except PatternError:
        return False
    return compiled.fullmatch(text.encode("utf-8")) is not None


def souffle_reading(pattern: str) -> str | None:
    """Why Soufflé answers a pattern of the policy dialect differently, or None: it rejects it
    (and never matches) or reads a part of it otherwise."""
    found = pattern_error(pattern, SOUFFLE)
    if found is not None:
        if found.kind != "invalid":
            return None
        return f"Soufflé's std::regex rejects it ({found.reason}) and never matches"
    translator = _SouffleTranslator(_latin1(pattern))
    translator.run()
    return translator.notes[0] if translator.notes else None
