"""Mutations of the sans-IO core: envelopes, ledgers, framing, the turn and ladder machines."""

from __future__ import annotations

from ._base import Mutation

MUTATIONS = [
    Mutation(
        "answer-once",
        "JSON-RPC: a request is answered at most once (the ledger refuses a second answer)",
        "core/_ledger.py",
        "        if entry is None:\n            stone = self._tombstones.get(id)",
        "        if entry is None:\n            return InFlight(id, 'x')\n            stone = self._tombstones.get(id)",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "no-answer-to-notification",
        "JSON-RPC: a notification is never answered",
        "core/_receiving.py",
        "        if rid is _MISSING:\n            if method == CANCEL_REQUEST_METHOD:",
        "        if rid is _MISSING:\n            self._reply_error(None, ErrorCode.INVALID_REQUEST, 'x', batch, None)\n            if method == CANCEL_REQUEST_METHOD:",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "serve-eof-when-no-prompt",
        "serve: the agent's input closed once no prompt is in flight",
        "core/_connection_end.py",
        "        if close and not self.input_closed:\n",
        "        if False:\n",
        (
            "tests/remote/test_serve_websocket.py::test_each_rung_is_taken_only_when_the_one_before_did_not_work",
        ),
    ),
    Mutation(
        "remote-disconnected",
        "a remote agent's lost connection resolves its turns disconnected",
        "core/_host_turn.py",
        "            if self.remote:\n                return Resolution.DISCONNECTED\n",
        "",
        ("tests/remote/test_connect_machine.py", "tests/remote/test_connect_profiles.py"),
    ),
    Mutation(
        "fast-notification-no-answer",
        "JSON-RPC: a notification is never answered (the receive loop's notification fast path)",
        "core/_receiving.py",
        "                        event = Notification(method, params)\n",
        "                        self._reply_error(None, ErrorCode.INVALID_REQUEST, 'x', None, None)\n"
        "                        event = Notification(method, params)\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-notification-run-no-answer",
        "JSON-RPC: a notification is never answered (a run's first notification)",
        "core/_receiving.py",
        "                        event = run = NotificationRun(method, [params])\n",
        "                        self._reply_error(None, ErrorCode.INVALID_REQUEST, 'x', None, None)\n"
        "                        event = run = NotificationRun(method, [params])\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-notification-jsonrpc",
        "a notification without jsonrpc 2.0 is invalid (the fast path leaves it to the checks)",
        "core/_receiving.py",
        '                if message.get("jsonrpc") == "2.0" and (\n',
        "                if (\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-notification-cancel-request",
        "$/cancel_request is not a plain notification (the fast path leaves it to the cancel checks)",
        "core/_receiving.py",
        "                    if type(method) is not str or method == CANCEL_REQUEST_METHOD:\n",
        "                    if type(method) is not str:\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-result-in-flight",
        "a result answers only a request of ours in flight (the fast path leaves others to the checks)",
        "core/_receiving.py",
        "                    and close_if_open(rid, Outcome.RESULT) is not None\n",
        "                    and (close_if_open(rid, Outcome.RESULT) is not None or True)\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "fast-result-tombstone",
        "an answered request leaves a tombstone (close_if_open's inlined ring), so a second answer is recognised",
        "core/_ledger.py",
        "                    ring.append(entry)\n                    tombstones[id] = entry\n",
        "                    ring.append(entry)\n",
        ("tests/core", "tests/aio"),
    ),
    Mutation(
        "own-text-no-lone-surrogate",
        "we never send a lone surrogate of our own (U+FFFD instead), nor fail a request for one",
        "core/_endpoint.py",
        '        except TypeError:  # a lone surrogate in a string: U+FFFD instead (core/_json.py)\n            return _dumps_own(message, self._default) + b"\\n"\n',
        "        except TypeError:\n            raise\n",
        ("tests/agent/test_odd_text.py::test_a_lone_surrogate_in_a_prompt_is_read_and_echoed_as_u_fffd",),
    ),
    Mutation(
        "negotiate-zero-gets-one",
        "initialize asking a version below every one spoken gets 1, never its own 0",
        "core/_profile.py",
        "    return PROFILES[max(below) if below else min(spoken)]\n",
        "    return PROFILES[max(below) if below else max(spoken)]\n",
        ("tests/agent/test_v2_runtime.py::test_version_negotiation",),
    ),
    Mutation(
        "turn-machine-close-is-the-hosts-cancel",
        "turn machine: a turn cancelled after the host closed its session counts as cancelled by the host",
        "core/_host_turn.py",
        " or self._abandoned or self.host_closed else",
        " or self._abandoned else",
        ("tests/driver/test_v2_host.py::test_a_turn_ended_by_the_hosts_close_was_cancelled_by_the_host",),
    ),
    Mutation(
        "json-deep-nesting-is-a-parse-error",
        "JSON nested too deep for any parser ([ x 100 000) is a parse error in serve, the network clients and stdio, never a RecursionError",
        "core/_json.py",
        "    except RecursionError:  # deeper than the interpreter's stack: a parse error, not a crash\n",
        "    except ZeroDivisionError:\n",
        ("tests/remote/test_deep_json.py", "tests/core/test_envelope.py"),
    ),
    Mutation(
        "json-too-deep-to-encode-is-answered",
        "a reply too deep to encode (an echo of params nested 500 deep) is answered -32603, never left unanswered",
        "core/_json.py",
        "        except (TypeError, RecursionError):  # not JSON, or nested too deep for scrub as well\n",
        "        except TypeError:\n",
        ("tests/aio/test_too_deep.py",),
    ),
    Mutation(
        "wire-reading-kind-no-string",
        "a reader of a recorded wire: an update kind that is no string is no kind (never raises)",
        "core/_wire_reading.py",
        "owner = life.route(update, kind if isinstance(kind, str) else None)",
        "owner = life.route(update, kind)",
        (
            "tests/remote/test_relay_ledger.py::test_an_update_whose_kind_is_no_string_is_relayed_and_the_turn_still_ends_at_its_idle",
            "tests/cli/test_check_wire_turns.py::test_other_sessions_and_hostile_kinds_are_read_without_harm",
        ),
    ),
]
