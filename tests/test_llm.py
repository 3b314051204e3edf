"""The shared chat-completions client against a real local HTTP server."""

import threading

import pytest

from h2htalk import llm
from tests.llm_server import ChatServer


@pytest.fixture
def server():
    chat_server = ChatServer().start()
    yield chat_server
    chat_server.stop()


def endpoint(server, **overrides):
    values = {"base_url": server.base_url, "model": "test-model", "timeout": 5.0}
    values.update(overrides)
    return llm.Endpoint(**values)


def no_wait(_state):
    return 0


MESSAGES = [{"role": "system", "content": "be kind"}, {"role": "user", "content": "hello there"}]


def test_normal_answer_with_usage_and_params(server):
    result = llm.chat(endpoint(server, params={"temperature": 0.3}), MESSAGES, {"max_tokens": 9})
    assert result.text == "reply from test-model"
    assert (result.prompt_tokens, result.completion_tokens) == (4, 3)
    assert result.finish_reason == "stop" and result.attempts == 1
    body = server.requests[0]["body"]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert body["messages"] == MESSAGES
    assert (body["temperature"], body["max_tokens"], body["model"]) == (0.3, 9, "test-model")


@pytest.mark.parametrize("failure", ["500", "malformed", "drop", "429:0"])
def test_transient_failures_are_retried(server, failure):
    server.script.extend([failure, failure])
    result = llm.chat(endpoint(server), MESSAGES, backoff=no_wait)
    assert result.text == "reply from test-model"
    assert result.attempts == 3
    assert len(server.requests) == 3


def test_retry_after_is_honoured(server):
    server.script.append("429:2")
    slept = []
    result = llm.chat(endpoint(server), MESSAGES, sleep=slept.append)
    assert result.attempts == 2
    assert slept == [2.0]


def test_gives_up_after_max_attempts_with_a_clear_error(server):
    server.script.extend(["500"] * 5)
    with pytest.raises(llm.LLMError) as failure:
        llm.chat(endpoint(server), MESSAGES, max_attempts=3, backoff=no_wait)
    assert failure.value.status == 500 and failure.value.attempts == 3
    assert "HTTP 500" in str(failure.value)
    assert len(server.requests) == 3


def test_client_errors_are_not_retried(server):
    server.script.append("400")
    with pytest.raises(llm.LLMError) as failure:
        llm.chat(endpoint(server), MESSAGES, backoff=no_wait)
    assert failure.value.status == 400 and not failure.value.retryable
    assert len(server.requests) == 1


def test_timeout_is_retried_then_reported(server):
    server.script.extend(["slow:1.5", "slow:1.5"])
    with pytest.raises(llm.LLMError) as failure:
        llm.chat(endpoint(server, timeout=0.5), MESSAGES, max_attempts=2, backoff=no_wait)
    assert failure.value.retryable and "Timeout" in str(failure.value)


def test_missing_api_key_variable_fails_without_calling(server, monkeypatch):
    monkeypatch.delenv("H2H_TEST_KEY", raising=False)
    with pytest.raises(llm.LLMError, match="H2H_TEST_KEY is not set"):
        llm.chat(endpoint(server, api_key_env="H2H_TEST_KEY"), MESSAGES)
    assert server.requests == []
    monkeypatch.setenv("H2H_TEST_KEY", "sk-secret")
    assert llm.chat(endpoint(server, api_key_env="H2H_TEST_KEY"), MESSAGES).text


def test_concurrency_per_endpoint_is_bounded(server):
    server.script.extend(["slow:0.3"] * 12)
    target = endpoint(server, max_concurrency=3)
    threads = [threading.Thread(target=llm.chat, args=(target, MESSAGES)) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(server.requests) == 12
    assert server.max_in_flight == 3
