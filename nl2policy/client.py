"""Talking to an OpenAI-compatible chat-completions endpoint: the only module that imports
``openai``.

Any endpoint that speaks the protocol works: OpenAI, a local vLLM or llama.cpp server. Every
request has a timeout; a request that times out, is rate limited (HTTP 429) or meets a server
error (5xx) or a dropped connection is retried a bounded number of times, after a backoff that
doubles from 0.5 s (at most 8 s, with jitter) or waits what the server's ``Retry-After`` (or
``retry-after-ms``) asks, up to 60 s. The retries are made here rather than by the ``openai``
client so that each one can be reported.

Nothing here raises for a bad answer: :meth:`Chat.ask` returns the text, or the
:class:`~policyc.nl2policy.problems.Problem` that kept it from being usable (a refusal, an empty
or truncated answer, the last HTTP failure). Only an endpoint that cannot be used at all — a
rejected API key, an unknown model, nothing ever reachable — raises :class:`ConfigurationError`.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import problems as P

DEFAULT_BASE_URL = "https://api.openai.com/v1"
MAX_RETRY_AFTER = 60.0


class ConfigurationError(Exception):
    """The endpoint cannot be used at all (the command exits with status 2)."""


@dataclass(frozen=True)
class Settings:
    model: str
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 120.0  # seconds per request
    retries: int = 3  # further attempts after a failed one
    temperature: float = 0.0
    json_mode: bool = True  # ask for `response_format: json_object`

    @property
    def url(self) -> str:
        return self.base_url or DEFAULT_BASE_URL


@dataclass(frozen=True)
class Reply:
    text: str | None  # the answer, when there is a usable one
    problem: P.Problem | None = None  # why there is none
    notes: tuple[P.Problem, ...] = ()  # what happened on the way (retries)


@dataclass
class Usage:
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_json(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


class Chat:
    """A chat-completions client with bounded retries and usage counts (thread-safe)."""

    def __init__(self, settings: Settings) -> None:
        from openai import OpenAI

        self.settings = settings
        self.usage = Usage()
        self.json_mode = settings.json_mode
        self.reached = False  # some request got an HTTP answer
        self.client = OpenAI(
            api_key=settings.api_key or "no-key",
            base_url=settings.url,
            timeout=settings.timeout,
            max_retries=0,
        )

    def ask(self, step: str, subject: str | None, messages: list[dict[str, str]]) -> Reply:
        import openai

        notes: list[P.Problem] = []
        failure: P.Problem | None = None
        attempts = self.settings.retries + 1
        attempt = 0
        while attempt < attempts:
            attempt += 1
            wait = _backoff(attempt)
            with self.usage.lock:
                self.usage.requests += 1
                if attempt > 1:
                    self.usage.retries += 1
            try:
                response = self._create(messages)
            except (ValueError, TypeError, RecursionError, openai.APIResponseValidationError) as error:
                # RecursionError: a body nested too deep for the client's JSON parser
                self.reached = True  # an HTTP 2xx answer whose body is not a chat completion
                return Reply(None, _not_a_completion(step, subject, error), tuple(notes))
            except openai.APITimeoutError:
                failure = P.MODEL_TIMEOUT(
                    step, f"no answer within {self.settings.timeout:g} s ({_tries(attempt)})", subject
                )
            except openai.APIConnectionError as error:
                failure = P.CONNECTION_FAILED(step, f"{_cause(error)} ({_tries(attempt)})", subject)
            except openai.APIStatusError as error:
                self.reached = True
                status = error.status_code
                if status in (401, 403):
                    raise ConfigurationError(
                        f"the endpoint at {self.settings.url} refused the API key (HTTP {status}): "
                        f"{_message(error)}; set OPENAI_API_KEY"
                    ) from None
                if status == 404:
                    raise ConfigurationError(
                        f"the endpoint at {self.settings.url} has no model `{self.settings.model}` or no "
                        f"chat completions (HTTP 404): {_message(error)}"
                    ) from None
                if status == 400 and self.json_mode and "response_format" in _message(error):
                    self.json_mode = False  # the server does not offer JSON mode: ask without it
                    attempt -= 1
                    continue
                if status == 429:
                    failure = P.RATE_LIMITED(
                        step, f"HTTP 429: {_message(error)} ({_tries(attempt)})", subject
                    )
                elif status >= 500 or status in (408, 409):
                    failure = P.SERVER_ERROR(
                        step, f"HTTP {status}: {_message(error)} ({_tries(attempt)})", subject
                    )
                else:
                    return Reply(
                        None,
                        P.REQUEST_REJECTED(step, f"HTTP {status}: {_message(error)}", subject),
                        tuple(notes),
                    )
                asked = _retry_after(error.response)
                wait = wait if asked is None else asked
            else:
                self.reached = True
                try:
                    reply = self._read(step, subject, response)
                except (TypeError, ValueError, AttributeError, LookupError, RecursionError) as error:
                    return Reply(None, _not_a_completion(step, subject, error), tuple(notes))
                if attempt > 1 and failure is not None:
                    notes.append(
                        P.RETRIED(
                            step,
                            f"answered after {attempt - 1} failed attempt(s): {failure.message}",
                            subject,
                        )
                    )
                return Reply(reply.text, reply.problem, tuple(notes))
            if attempt < attempts:
                time.sleep(wait)
        assert failure is not None
        if failure.name == "connection-failed" and not self.reached:
            raise ConfigurationError(
                f"cannot reach the model endpoint at {self.settings.url}: {failure.message}"
            )
        return Reply(None, failure, tuple(notes))

    def _create(self, messages: list[dict[str, str]]) -> Any:
        options: dict[str, Any] = {}
        if self.json_mode:
            options["response_format"] = {"type": "json_object"}
        return self.client.chat.completions.create(
            model=self.settings.model,
            messages=messages,  # type: ignore[arg-type]
            temperature=self.settings.temperature,
            **options,
        )

    def _read(self, step: str, subject: str | None, response: Any) -> Reply:
        """The text of a completion, or why it has none."""
        choices = getattr(response, "choices", None)
        if not choices:
            return Reply(None, P.EMPTY_ANSWER(step, "the response has no choices", subject))
        usage = getattr(response, "usage", None)
        if usage is not None:
            with self.usage.lock:
                self.usage.prompt_tokens += _tokens(getattr(usage, "prompt_tokens", 0))
                self.usage.completion_tokens += _tokens(getattr(usage, "completion_tokens", 0))
        choice = choices[0]
        message = getattr(choice, "message", None)
        refusal = getattr(message, "refusal", None)
        finish = getattr(choice, "finish_reason", None)
        content = getattr(message, "content", None)
        if refusal:
            return Reply(None, P.REFUSAL(step, f"the model refused: {P.shorten(str(refusal), 200)}", subject))
        if finish == "content_filter":
            return Reply(
                None, P.REFUSAL(step, "the answer was withheld by the endpoint's content filter", subject)
            )
        if not isinstance(content, str) or not content.strip():
            if finish == "length":
                return Reply(
                    None, P.TRUNCATED_ANSWER(step, "the answer was cut off before any text", subject)
                )
            return Reply(None, P.EMPTY_ANSWER(step, "the model answered nothing", subject))
        if finish == "length":
            return Reply(
                None,
                P.TRUNCATED_ANSWER(
                    step, f"the answer was cut off at the length limit: {P.shorten(content, 200)}", subject
                ),
            )
        return Reply(content)


def _not_a_completion(step: str, subject: str | None, error: Exception) -> P.Problem:
    return P.MALFORMED_ANSWER(
        step,
        f"the endpoint's response is not a chat completion ({type(error).__name__}: {P.shorten(str(error), 200)}); "
        "is the base URL the `/v1` URL of an OpenAI-compatible server?",
        subject,
    )


def _tokens(value: Any) -> int:
    """A token count as the server reported it (0 when it is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _backoff(attempt: int) -> float:
    return min(0.5 * 2 ** (attempt - 1), 8.0) * (1 - 0.25 * random.random())


def _retry_after(response: Any) -> float | None:
    """What the server asks to wait (``retry-after-ms``, or ``retry-after`` in seconds or as a
    date), when it is between 0 and 60 seconds."""
    headers = getattr(response, "headers", None) or {}
    wait: float | None = None
    try:
        if headers.get("retry-after-ms") is not None:
            wait = float(headers["retry-after-ms"]) / 1000
        elif headers.get("retry-after") is not None:
            value = headers["retry-after"]
            try:
                wait = float(value)
            except ValueError:
                date = email.utils.parsedate_to_datetime(value)
                wait = date.timestamp() - time.time()
    except (TypeError, ValueError, OverflowError):
        return None
    if wait is None or not 0 <= wait <= MAX_RETRY_AFTER:
        return None
    return wait


def _tries(attempt: int) -> str:
    return f"{attempt} attempt{'s' if attempt != 1 else ''}"


def _message(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return P.shorten(inner["message"], 200)
        if isinstance(inner, str):
            return P.shorten(inner, 200)
    return P.shorten(str(getattr(error, "message", None) or error), 200)


def _cause(error: BaseException) -> str:
    cause = error.__cause__ or error.__context__
    text = str(cause) if cause is not None and str(cause) else str(error)
    return P.shorten(text, 200)
