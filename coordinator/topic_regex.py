"""KIP-848's topic regular expressions: RE2, and Kafka's words when one is invalid.

A consumer may subscribe by regular expression (``SubscribedTopicRegex``); Kafka compiles it with
RE2/J and the coordinator here with RE2 (C++), the same syntax. When one is invalid, Kafka's
coordinator answers INVALID_REGULAR_EXPRESSION with RE2/J's description of why, which clients
show to their users; RE2 names the same errors differently (``missing )`` for ``missing closing
)``), so ``regex_error`` puts them in RE2/J's words, checked against Kafka's own tool
(``kafka-consumer-groups --validate-regex``) in tests/kafka/test_validate_regex.py. RE2
accepts a name given to two groups, which RE2/J refuses: ``regex_error`` counts the pattern's
named groups itself (``_named_groups``) and refuses a pattern with fewer names than that, in
RE2/J's words.
"""

from __future__ import annotations

from functools import lru_cache

import re2

# An invalid pattern is an answer to a client, not a line on the coordinator's stderr (RE2
# logs every one it refuses by default).
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

# RE2's error code text -> RE2/J's description (PatternSyntaxException.getDescription).
_RE2J_WORDS = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "unexpected )": "regexp/syntax: internal error",  # RE2/J's words for a stray ")"
    "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid named capture group": "invalid named capture",
    "invalid perl operator": "invalid or unsupported Perl syntax",
}


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> re2._Regexp:
    """RE2 (Kafka's RE2/J semantics); re2.error for an invalid pattern."""
    return re2.compile(pattern, options=_OPTIONS)


@lru_cache(maxsize=1024)  # a consumer may send its pattern with every heartbeat
def regex_error(pattern: str) -> str | None:
    """None when ``pattern`` is a valid regular expression, else why not, as Kafka says it."""
    try:
        compiled = compile_regex(pattern)
    except re2.error as exc:
        text = exc.args[0] if exc.args else ""
        text = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
        code, _, argument = text.partition(": ")
        if code == "invalid perl operator" and argument.startswith("(?<"):
            return "invalid named capture"  # RE2/J reads "(?<" as the start of a named group
        return _RE2J_WORDS.get(code, code)
    if compiled.groupindex and _named_groups(pattern) > len(compiled.groupindex):
        return "duplicate capture group name"  # RE2 kept the first; RE2/J refuses
    return None


def _named_groups(pattern: str) -> int:
    """How many named groups (``(?P<name>`` or ``(?<name>``) a pattern RE2 accepted opens:
    what is escaped (``\\(``), quoted (``\\Q...\\E``) or in a character class (``[(?P<a>]``)
    opens none."""
    count, i, end = 0, 0, len(pattern)
    while i < end:
        char = pattern[i]
        if char == "\\":
            if pattern.startswith("\\Q", i):
                quoted_end = pattern.find("\\E", i + 2)
                i = end if quoted_end < 0 else quoted_end + 2
            else:
                i += 2
        elif char == "[":
            i = _class_end(pattern, i)
        else:
            if char == "(" and pattern.startswith(("(?P<", "(?<"), i):
                count += 1
            i += 1
    return count


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class opening at ``start`` (RE2's syntax: a ``]`` first,
    after an optional ``^``, is a member; ``[:alpha:]`` names a class inside)."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
        elif pattern.startswith("[:", i) and (named_end := pattern.find(":]", i + 2)) >= 0:
            i = named_end + 2
        elif pattern[i] == "]":
            return i + 1
        else:
            i += 1
    return i
