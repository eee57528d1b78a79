"""Providers over real transports: loopback HTTP servers and a real subprocess."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.dream.helpers import LLMServer, anthropic, openai

from tideline.dream.errors import DreamError, ProviderError
from tideline.dream.providers import (
    AnthropicProvider,
    CommandProvider,
    Message,
    OpenAIProvider,
    endpoint,
    make_provider,
)
from tideline.dream.schemas import SCHEMAS
from tideline.dream.settings import DreamSettings, parse_layers

SCHEMA = SCHEMAS["wander"]
ASK = [Message("user", "Where did the wander go?")]


def test_openai_request_shape_and_usage(openai_server: LLMServer) -> None:
    openai_server.replies.append('{"found": false}')
    got = openai(openai_server).complete(ASK, schema=SCHEMA, schema_name="tideline_wander")
    assert got.text == '{"found": false}'
    assert got.tokens_in > 1000 and got.tokens_out >= 100 and not got.estimated
    assert not got.truncated and got.model == "test-model"
    req = openai_server.requests[0]
    assert req["model"] == "test-model"
    assert [m["role"] for m in req["messages"]] == ["system", "user"]
    assert req["messages"][1]["content"] == "Where did the wander go?"
    assert req["response_format"]["type"] == "json_schema"
    assert req["response_format"]["json_schema"]["schema"] == SCHEMA
    assert openai_server.headers[0]["authorization"] == "Bearer sk-test-secret"


def test_openai_truncation_is_reported(openai_server: LLMServer) -> None:
    openai_server.finish = "length"
    openai_server.replies.append('{"found": tr')
    got = openai(openai_server).complete(ASK, schema=SCHEMA, schema_name="x")
    assert got.truncated


def test_openai_falls_back_when_json_schema_is_refused(openai_server: LLMServer) -> None:
    openai_server.replies += [
        (400, {"error": {"message": "response_format json_schema is not supported"}}),
        '{"found": false}', '{"found": false}']
    provider = openai(openai_server)
    assert provider.complete(ASK, schema=SCHEMA, schema_name="x").text == '{"found": false}'
    assert "response_format" in openai_server.requests[0]
    assert "response_format" not in openai_server.requests[1]
    provider.complete(ASK, schema=SCHEMA, schema_name="x")  # remembered: not sent again
    assert "response_format" not in openai_server.requests[2]


def test_openai_retries_busy_server_then_fails_typed(openai_server: LLMServer) -> None:
    openai_server.replies += [(503, {"error": "overloaded"}), '{"found": false}']
    assert openai(openai_server, retries=1).complete(ASK, schema=SCHEMA, schema_name="x").text
    openai_server.replies += [(429, {"error": {"message": "slow down sk-test-secret"}})] * 2
    with pytest.raises(ProviderError) as err:
        openai(openai_server, retries=1).complete(ASK, schema=SCHEMA, schema_name="x")
    assert "HTTP 429" in str(err.value) and "sk-test-secret" not in str(err.value)
    assert err.value.exit_code == 32


def test_openai_unreachable_endpoint_is_a_typed_error() -> None:
    provider = OpenAIProvider("http://127.0.0.1:9", "m", retries=0, timeout=2)
    with pytest.raises(ProviderError, match="after 1 attempt"):
        provider.complete(ASK, schema=SCHEMA, schema_name="x")


def test_anthropic_messages_api(anthropic_server: LLMServer) -> None:
    anthropic_server.replies.append('{"found": false}')
    got = anthropic(anthropic_server, max_tokens=777).complete(
        [*ASK, Message("assistant", "{}"), Message("user", "again")], schema=SCHEMA,
        schema_name="x")
    assert got.text == '{"found": false}' and got.tokens_in > 1000 and not got.estimated
    req, headers = anthropic_server.requests[0], anthropic_server.headers[0]
    assert headers["x-api-key"] == "ant-test-secret"
    assert headers["anthropic-version"] == "2023-06-01"
    assert req["model"] == "claude-test" and req["max_tokens"] == 777
    assert isinstance(req["system"], str) and "JSON" in req["system"]
    assert [m["role"] for m in req["messages"]] == ["user", "assistant", "user"]
    anthropic_server.finish = "max_tokens"
    anthropic_server.replies.append('{"found"')
    assert anthropic(anthropic_server).complete(ASK, schema=SCHEMA, schema_name="x").truncated


def test_anthropic_needs_a_key_for_the_real_api() -> None:
    with pytest.raises(DreamError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider(None, "claude-x", None)


def _script(tmp_path: Path, body: str) -> str:
    script = tmp_path / "llm.py"
    script.write_text(body, encoding="utf-8")
    return f"{sys.executable} {script}"


def test_command_provider_prompt_on_stdin(tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    cmd = _script(tmp_path, (
        "import sys, pathlib\n"
        f"pathlib.Path({str(seen)!r}).write_text(sys.stdin.read(), encoding='utf-8')\n"
        "print('```json')\nprint('{\"found\": false}')\nprint('```')\n"))
    provider = CommandProvider(cmd, timeout=60)
    got = provider.complete([*ASK, Message("assistant", "bad"), Message("user", "fix it")],
                            schema=SCHEMA, schema_name="x")
    assert '{"found": false}' in got.text and got.estimated
    assert got.tokens_in > 0 and got.tokens_out > 0
    prompt = seen.read_text(encoding="utf-8")
    assert "Where did the wander go?" in prompt and "fix it" in prompt and "bad" in prompt
    assert provider.model == sys.executable.rsplit("/", 1)[-1]


def test_command_provider_failures_are_typed(tmp_path: Path) -> None:
    failing = _script(tmp_path, "import sys\nsys.stderr.write('quota exceeded\\n')\nsys.exit(3)\n")
    with pytest.raises(ProviderError, match="status 3: quota exceeded"):
        CommandProvider(failing).complete(ASK, schema=SCHEMA, schema_name="x")
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n", encoding="utf-8")
    with pytest.raises(ProviderError, match="timed out"):
        CommandProvider([sys.executable, str(slow)], timeout=0.5).complete(
            ASK, schema=SCHEMA, schema_name="x")
    with pytest.raises(ProviderError, match="not found"):
        CommandProvider("no-such-llm-binary-xyz -p").complete(ASK, schema=SCHEMA,
                                                               schema_name="x")


@pytest.mark.parametrize(("base", "want"), [
    ("http://h:8080", "http://h:8080/v1/chat/completions"),
    ("http://h:8080/", "http://h:8080/v1/chat/completions"),
    ("http://h:11434/v1", "http://h:11434/v1/chat/completions"),
    ("https://h/v1/chat/completions", "https://h/v1/chat/completions"),
    ("https://h/openai/deployments/x/chat/completions?api-version=1",
     "https://h/openai/deployments/x/chat/completions?api-version=1"),
])
def test_endpoint_normalisation(base: str, want: str) -> None:
    assert endpoint(base, "/v1/chat/completions") == want


def test_settings_from_env_and_flags() -> None:
    env = {"TIDELINE_DREAM_PROVIDER": "Anthropic", "ANTHROPIC_API_KEY": "a-key",
           "OPENAI_API_KEY": "o-key", "TIDELINE_DREAM_MODEL": "m1",
           "TIDELINE_DREAM_LAYERS": "dream, comb", "TIDELINE_DREAM_TIMEOUT": "12.5"}
    s = DreamSettings.load(env=env)
    assert (s.provider, s.api_key, s.model, s.layers, s.timeout) == (
        "anthropic", "a-key", "m1", ("comb", "dream"), 12.5)
    assert "a-key" not in repr(s)
    flags = DreamSettings.load(env=env, provider="openai", model="m2", layers="solidify")
    assert (flags.provider, flags.api_key, flags.model, flags.layers) == (
        "openai", "o-key", "m2", ("solidify",))
    own = DreamSettings.load(env={**env, "TIDELINE_DREAM_API_KEY": "own"})
    assert own.api_key == "own"
    assert DreamSettings.load(env={"TIDELINE_DREAM_COMMAND": "claude -p"}).resolved_provider() \
        == "command"
    assert DreamSettings.load(env={"TIDELINE_DREAM_URL": "http://h"}).resolved_provider() \
        == "openai"
    with pytest.raises(DreamError, match="no dream provider configured"):
        DreamSettings.load(env={}).resolved_provider()
    with pytest.raises(DreamError, match="unknown provider"):
        DreamSettings.load(env={"TIDELINE_DREAM_PROVIDER": "bard"})
    with pytest.raises(DreamError, match="TIDELINE_DREAM_TIMEOUT"):
        DreamSettings.load(env={"TIDELINE_DREAM_TIMEOUT": "soon"})
    with pytest.raises(DreamError, match="unknown layer"):
        parse_layers("solidify,nap")
    assert parse_layers(["dream", "solidify"]) == ("solidify", "dream")


def test_make_provider() -> None:
    with pytest.raises(DreamError, match="needs a model"):
        make_provider(DreamSettings.load(env={"TIDELINE_DREAM_URL": "http://h"}))
    p = make_provider(DreamSettings.load(env={"TIDELINE_DREAM_URL": "http://h:1/v1",
                                              "TIDELINE_DREAM_MODEL": "qwen"}))
    assert isinstance(p, OpenAIProvider) and p.url == "http://h:1/v1/chat/completions"
    c = make_provider(DreamSettings.load(env={"TIDELINE_DREAM_COMMAND": "claude -p"}))
    assert isinstance(c, CommandProvider) and c.argv == ["claude", "-p"]
