"""KIP-848's topic regular expressions: RE2, and Kafka's words when one is invalid.

A consumer may subscribe by regular expression (``SubscribedTopicRegex``); Kafka compiles it with
RE2/J and the coordinator here with RE2 (C++), the same syntax. When one is invalid, Kafka's
coordinator answers INVALID_REGULAR_EXPRESSION with RE2/J's description of why, which clients
show to their users; RE2 names the same errors differently (``missing )`` for ``missing closing
)``), so ``regex_error`` puts them in RE2/J's words, checked against Kafka's own tool
(``kafka-consumer-groups --validate-regex``) in tests/kafka/test_validate_regex.py. Known to
differ still: RE2/J refuses a name given to two groups, which RE2 accepts.
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


def regex_error(pattern: str) -> str | None:
    """None when ``pattern`` is a valid regular expression, else why not, as Kafka says it."""
    try:
        compile_regex(pattern)
    except re2.error as exc:
        text = exc.args[0] if exc.args else ""
        text = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
        code, _, argument = text.partition(": ")
        if code == "invalid perl operator" and argument.startswith("(?<"):
            return "invalid named capture"  # RE2/J reads "(?<" as the start of a named group
        return _RE2J_WORDS.get(code, code)
    return None
