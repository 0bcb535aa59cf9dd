"""Malformed and odd input that once broke a peer (or could): every fuzzer starts from it.

Each entry is one line as bytes (no newline). ``VALID_BUT_ODD`` lines are valid JSON-RPC that
naive parsers reject; ``MALFORMED`` lines are not messages at all or break the rules.
"""

from __future__ import annotations

VALID_BUT_ODD: list[tuple[str, bytes]] = [
    # RFC 8259 allows lone surrogate escapes; JavaScript's JSON.stringify emits them.
    ("lone high surrogate in a notification", b'{"jsonrpc":"2.0","method":"_x/n","params":{"t":"\\ud83d"}}'),
    (
        "lone low surrogate in a request",
        b'{"jsonrpc":"2.0","id":"s1","method":"_x/r","params":{"t":"\\udce9"}}',
    ),
    (
        "surrogate pair split across strings",
        b'{"jsonrpc":"2.0","method":"_x/n","params":["\\ud83d","\\ude00"]}',
    ),
    ("big integer", b'{"jsonrpc":"2.0","method":"_x/n","params":{"n":123456789012345678901234567890}}'),
    ("BOM-less unicode", '{"jsonrpc":"2.0","method":"_x/n","params":{"t":"caf\u00e9 \u2603"}}'.encode()),
    ("CRLF ending", b'{"jsonrpc":"2.0","method":"_x/n"}\r'),
    ("batch of notifications", b'[{"jsonrpc":"2.0","method":"_x/n"},{"jsonrpc":"2.0","method":"_x/m"}]'),
]

MALFORMED: list[tuple[str, bytes]] = [
    ("not json", b"hello world"),
    ("agent banner", b"Starting agent v1.2.3 (pid 1234) ..."),
    ("invalid utf-8", b'{"jsonrpc":"2.0","method":"caf\xe9"}'),
    ("invalid utf-8 outside strings", b'{"jsonrpc":"2.0",\xff"method":"x"}'),
    ("truncated", b'{"jsonrpc":"2.0","id":1,"method":"x"'),
    ("NaN", b'{"jsonrpc":"2.0","method":"x","params":[NaN]}'),
    ("Infinity", b'{"jsonrpc":"2.0","method":"x","params":[Infinity]}'),
    ("deep nesting", b"[" * 5000 + b"]" * 5000),
    ("deep nesting, unclosed", b"{" * 20000),
    ("scalar", b"42"),
    ("null", b"null"),
    ("empty batch", b"[]"),
    ("batch of garbage", b"[1,2,3]"),
    (
        "error object without id (answers to our notifications)",
        b'{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"}}',
    ),
    (
        "error with id null",
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}',
    ),
    ("result without id", b'{"jsonrpc":"2.0","result":{}}'),
    ("response with float id", b'{"jsonrpc":"2.0","id":1.0,"result":{}}'),
    ("response with string id", b'{"jsonrpc":"2.0","id":"1","result":{}}'),
    ("response with both", b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}'),
    ("response with unknown id", b'{"jsonrpc":"2.0","id":987654,"result":{}}'),
    ("request with bool id", b'{"jsonrpc":"2.0","id":true,"method":"x"}'),
    ("request with object id", b'{"jsonrpc":"2.0","id":{"a":1},"method":"x"}'),
    ("request with scalar params", b'{"jsonrpc":"2.0","id":"p1","method":"x","params":3}'),
    ("wrong jsonrpc", b'{"jsonrpc":"1.0","id":"w1","method":"x"}'),
    ("method not a string", b'{"jsonrpc":"2.0","id":"m1","method":5}'),
    ("cancel without requestId", b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{}}'),
    (
        "cancel for an unknown id",
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":424242}}',
    ),
    (
        "session/prompt without prompt",
        b'{"jsonrpc":"2.0","id":"q1","method":"session/prompt","params":{"sessionId":"nope"}}',
    ),
    (
        "session/prompt with a string prompt",
        b'{"jsonrpc":"2.0","id":"q2","method":"session/prompt","params":{"sessionId":"nope","prompt":"hi"}}',
    ),
    (
        "session/update with garbage",
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":5,"update":"x"}}',
    ),
    (
        "session/update unknown kind",
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"???"}}}',
    ),
    (
        "duplicate request id, method not Unicode (found by the long fuzz run)",
        b'[{"jsonrpc":"2.0","id":"d1","method":"\\ud8a4","params":{}},{"jsonrpc":"2.0","id":"d1","method":"\\ud8a4"}]',
    ),
    ("id with lone surrogates, invalid method", b'{"jsonrpc":"2.0","id":"\\ud83d","method":5}'),
    (
        "id beyond 64 bits, line orjson rejects",
        b'{"jsonrpc":"2.0","id":1180591620717411303424,"method":5,"x":"\\ud83d"}',
    ),
    ("whitespace only", b"   \t "),
    ("NUL bytes", b"\x00\x00\x00"),
]

CORPUS: list[tuple[str, bytes]] = VALID_BUT_ODD + MALFORMED
