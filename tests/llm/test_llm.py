"""The LLM layer against a real local chat server, through the real ``openai`` client.

Each test scripts the server's answers (``chat_server.script(...)``) and asserts on what the
client made of them and on what it sent (``chat_server.requests``). Timeouts and backoff are
short so that failure paths — retries, timeouts, budgets — run in well under a second each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from support.chat_server import ChatServer, Reply, chat_server, delay, error, malformed  # noqa: F401 (fixture)

from kqe_rdf.core.config import Settings
from kqe_rdf.llm.client import LLM, Budget, BudgetExceeded, LLMError, Usage, describe_llm, extract_json

SCHEMA = {
    "type": "object",
    "required": ["diseases"],
    "properties": {"diseases": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
}
PROMPT = "Which diseases explain arachnodactyly and lens dislocation?"


@pytest.fixture
def make_llm(chat_server, tmp_path):
    """``make_llm(**options)``: an LLM on the test's server with test-sized timeouts and its own cache."""
    made = []

    def make(**options):
        options = {"model": "scripted-model", "base_url": chat_server.url, "timeout": 0.5, "max_retries": 2,
                   "backoff": 0.01, "cache": tmp_path / "llm.sqlite", **options}
        made.append(LLM(**options))
        return made[-1]

    yield make
    for llm in made:
        llm.close()


@pytest.fixture
def llm(make_llm):
    return make_llm()


# Structured answers.

def test_json_answer_is_parsed_and_the_schema_is_sent(llm, chat_server):
    chat_server.script('{"diseases": ["Marfan syndrome"]}')
    result = llm.json(PROMPT, SCHEMA, name="diseases")
    assert result.ok and result.value == {"diseases": ["Marfan syndrome"]}
    assert (result.error, result.attempts, result.repairs) == (None, 1, ())
    assert result.raw == '{"diseases": ["Marfan syndrome"]}'
    sent = chat_server.requests[0]
    assert sent["model"] == "scripted-model" and sent["temperature"] == 0
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {"name": "diseases", "schema": SCHEMA}}
    assert sent["messages"][-1]["content"].startswith(PROMPT) and "JSON Schema" in sent["messages"][-1]["content"]


@pytest.mark.parametrize("answer, repair", [
    ('```json\n{"diseases": ["Marfan syndrome"]}\n```', "code fence"),
    ('Based on the phenotypes, the answer is:\n{"diseases": ["Marfan syndrome"]}\nLet me know if you need more.',
     "surrounding text"),
    ('{"diseases": ["Marfan syndrome",],}', "trailing comma"),
    ("{'diseases': ['Marfan syndrome']}", "single quotes"),
])
def test_broken_json_is_repaired(llm, chat_server, answer, repair):
    chat_server.script(answer)
    result = llm.json(PROMPT, SCHEMA)
    assert result.ok and result.value == {"diseases": ["Marfan syndrome"]}
    assert repair in result.repairs and len(chat_server.requests) == 1


def test_python_literals_are_repaired(llm, chat_server):
    chat_server.script("Answer: {'found': True, 'reason': None, 'diseases': ['Marfan syndrome']}")
    result = llm.json(PROMPT, SCHEMA)
    assert result.value == {"found": True, "reason": None, "diseases": ["Marfan syndrome"]}
    assert "Python literals" in result.repairs


def test_truncated_json_keeps_only_complete_elements(llm, chat_server):
    chat_server.script(Reply('{"diseases": ["Marfan syndrome", "Loeys-Dietz syndrome", "Homocyst',
                             finish_reason="length"))
    result = llm.json(PROMPT, SCHEMA)
    assert result.ok and result.truncated
    assert result.value == {"diseases": ["Marfan syndrome", "Loeys-Dietz syndrome"]}


def test_a_cut_off_answer_in_single_quotes_keeps_its_complete_elements(llm, chat_server):
    chat_server.script(Reply("{'diseases': ['Marfan syndrome', 'Loeys", finish_reason="length"))
    result = llm.json(PROMPT, SCHEMA)
    assert result.value == {"diseases": ["Marfan syndrome"]}
    assert result.truncated and "single quotes" in result.repairs and len(chat_server.requests) == 1


def test_an_escaped_apostrophe_is_mended_and_named(llm, chat_server):
    chat_server.script(r'{"diseases": ["Marfan\'s syndrome"]}')  # a JSON string cannot escape an apostrophe
    result = llm.json(PROMPT, SCHEMA)
    assert result.value == {"diseases": ["Marfan's syndrome"]} and result.repairs == ("escaped quote",)


def test_truncated_before_any_complete_element_is_reasked(llm, chat_server):
    chat_server.script(Reply('{"diseases": ["Marf', finish_reason="length"), '{"diseases": ["Marfan syndrome"]}')
    result = llm.json(PROMPT, SCHEMA)
    assert result.ok and result.attempts == 2
    assert "cut off" in chat_server.requests[1]["messages"][-1]["content"]


def test_invalid_then_valid_reasks_once_with_the_validation_error(llm, chat_server):
    chat_server.script('{"diseases": "Marfan syndrome"}', '{"diseases": ["Marfan syndrome"]}')
    result = llm.json(PROMPT, SCHEMA)
    assert result.ok and result.value == {"diseases": ["Marfan syndrome"]} and result.attempts == 2
    reask = chat_server.requests[1]["messages"]
    assert reask[:-2] == chat_server.requests[0]["messages"]
    assert reask[-2] == {"role": "assistant", "content": '{"diseases": "Marfan syndrome"}'}
    assert "$.diseases: expected array, got string 'Marfan syndrome'" in reask[-1]["content"]


def test_invalid_twice_gives_a_failed_result_with_the_raw_answer(llm, chat_server):
    chat_server.script('{"illnesses": ["Marfan"]}', "I am not sure, sorry.")
    result = llm.json(PROMPT, SCHEMA)
    assert not result.ok and result.value is None and result.attempts == 2
    assert result.raw == "I am not sure, sorry."
    assert "no JSON object or array" in result.error and 'missing required property "diseases"' in result.error
    assert len(chat_server.requests) == 2


def test_the_callers_validator_is_applied_and_its_message_reasked(llm, chat_server):
    known = {"Marfan syndrome"}

    def only_known(value):
        unknown = set(value["diseases"]) - known
        return f"unknown diseases {sorted(unknown)}" if unknown else None

    chat_server.script('{"diseases": ["Marfan syndrom"]}', '{"diseases": ["Marfan syndrome"]}')
    result = llm.json(PROMPT, SCHEMA, validate=only_known)
    assert result.ok and result.attempts == 2
    assert "unknown diseases ['Marfan syndrom']" in chat_server.requests[1]["messages"][-1]["content"]


def test_a_validator_that_raises_gives_a_failed_result(llm, chat_server):
    chat_server.script('{"diseases": ["x"]}', '{"diseases": ["y"]}')
    result = llm.json(PROMPT, SCHEMA, validate=lambda value: value["missing"])
    assert not result.ok and "KeyError" in result.error


@pytest.mark.parametrize("empty", ["", "   \n", None])
def test_empty_content_is_reasked_and_never_an_empty_result(llm, chat_server, empty):
    chat_server.script(Reply(empty), Reply(empty), Reply(empty))
    result = llm.json(PROMPT, SCHEMA)
    assert not result.ok and result.value is None and "empty" in result.error
    assert llm.text("say something") == (empty or "")


def test_json_without_schema_asks_for_a_json_object(llm, chat_server):
    chat_server.script('["a", "b"]')
    result = llm.json("List two letters.")
    assert result.ok and result.value == ["a", "b"]
    assert chat_server.requests[0]["response_format"] == {"type": "json_object"}


# Structured output on servers that lack it.

def test_json_schema_unsupported_falls_back_to_json_object(llm, chat_server):
    chat_server.script(error(400, "response_format 'json_schema' is not supported by this server"),
                       '{"diseases": ["Marfan syndrome"]}', '{"diseases": ["Ehlers-Danlos syndrome"]}')
    assert llm.json(PROMPT, SCHEMA).value == {"diseases": ["Marfan syndrome"]}
    assert [r["response_format"]["type"] for r in chat_server.requests] == ["json_schema", "json_object"]
    assert llm.usage.calls == 1 and llm.usage.failures == 0
    # JSON mode carries the schema (llama.cpp's servers constrain generation with it) ...
    assert chat_server.requests[1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    # ... and the refusal is remembered: the next structured call goes straight to JSON mode.
    assert llm.json("Which disease explains joint hypermobility?", SCHEMA).ok
    assert chat_server.requests[2]["response_format"]["type"] == "json_object"


def test_no_json_mode_at_all_falls_back_to_an_instruction(llm, chat_server):
    chat_server.script(error(400, "Unsupported value: 'response_format.type' json_schema"),
                       error(400, "Unrecognized field 'schema' in response_format"),
                       error(400, "json_object response format not supported"),
                       'Here it is: {"diseases": ["Marfan syndrome"]}')
    result = llm.json(PROMPT, SCHEMA)
    assert result.ok and result.value == {"diseases": ["Marfan syndrome"]}
    assert "response_format" not in chat_server.requests[3]
    assert "conforms to this JSON Schema" in chat_server.requests[3]["messages"][-1]["content"]


def test_a_500_refusing_the_response_format_is_not_retried_but_falls_back(llm, chat_server):
    """llama-cpp-python answers an unsupported json_schema with HTTP 500 and a validation error."""
    chat_server.script(error(500, "1 validation error: ('body', 'response_format', 'type') Input should be "
                                  "'text' or 'json_object'"), '{"diseases": ["Marfan syndrome"]}')
    assert llm.json(PROMPT, SCHEMA).value == {"diseases": ["Marfan syndrome"]}
    assert [r["response_format"]["type"] for r in chat_server.requests] == ["json_schema", "json_object"]


def test_a_cached_fallback_answer_is_found_by_a_new_instance(make_llm, chat_server):
    chat_server.script(error(400, "response_format json_schema unsupported"), '{"diseases": ["Marfan syndrome"]}')
    assert make_llm().json(PROMPT, SCHEMA).ok
    assert make_llm().json(PROMPT, SCHEMA).value == {"diseases": ["Marfan syndrome"]}
    assert len(chat_server.requests) == 2


def test_other_400s_in_json_mode_are_errors(llm, chat_server):
    chat_server.script(error(400, "This model's maximum context length is 4096 tokens"))
    with pytest.raises(LLMError, match="maximum context length") as raised:
        llm.json(PROMPT, SCHEMA)
    assert raised.value.status == 400 and len(chat_server.requests) == 1


# Retries and errors.

def test_a_500_is_retried(llm, chat_server):
    chat_server.script(error(500, "upstream crashed"), "Marfan syndrome")
    assert llm.text(PROMPT) == "Marfan syndrome"
    assert len(chat_server.requests) == 2 and llm.usage.retries == 1 and llm.usage.calls == 1


def test_a_429_is_retried(llm, chat_server):
    chat_server.script(error(429, "Rate limit reached", retry_after="0"), "Marfan syndrome")
    assert llm.text(PROMPT) == "Marfan syndrome"
    assert len(chat_server.requests) == 2


def test_503_forever_gives_up_after_max_retries_in_bounded_time(make_llm, chat_server):
    llm = make_llm(max_retries=3)
    chat_server.script(*[error(503, "overloaded")] * 10)
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"failed 4 time\(s\), last: HTTP 503: overloaded"):
        llm.text(PROMPT)
    assert time.monotonic() - start < 2
    assert len(chat_server.requests) == 4
    assert (llm.usage.calls, llm.usage.retries, llm.usage.failures) == (0, 3, 1)


@pytest.mark.parametrize("status, message, hint", [
    (400, "Invalid value for temperature", "request parameters"),
    (401, "Incorrect API key provided", "OPENAI_API_KEY"),
    (404, "The model `gpt-9` does not exist", "KQE_LLM_MODEL"),
])
def test_client_errors_are_not_retried_and_say_what_to_check(llm, chat_server, status, message, hint):
    chat_server.script(error(status, message), "never reached")
    with pytest.raises(LLMError) as raised:
        llm.text(PROMPT)
    assert raised.value.status == status
    assert f"HTTP {status}: {message}" in str(raised.value) and hint in str(raised.value)
    assert len(chat_server.requests) == 1 and chat_server.pending == 1


def test_a_timeout_is_retried(llm, chat_server):
    chat_server.script(delay(2.0, "too late"), "Marfan syndrome")
    assert llm.text(PROMPT) == "Marfan syndrome"
    assert len(chat_server.requests) == 2


def test_timeouts_forever_give_an_llm_error(make_llm, chat_server):
    llm = make_llm(timeout=0.2, max_retries=1)
    chat_server.script(delay(3.0, "late"), delay(3.0, "late"))
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"no answer within 0.2 s"):
        llm.text(PROMPT)
    assert time.monotonic() - start < 2 and len(chat_server.requests) == 2


def test_an_unreachable_server_gives_an_llm_error(make_llm):
    with ChatServer() as gone:
        url = gone.url
    with pytest.raises(LLMError, match="cannot connect"):
        make_llm(base_url=url, max_retries=1).text(PROMPT)


# Hostile answers.

def test_an_html_page_with_status_200_is_retried_then_reported(llm, chat_server):
    page = "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"
    chat_server.script(*[malformed(page)] * 3)
    with pytest.raises(LLMError, match="not JSON: '502 Bad Gateway Bad Gateway'"):
        llm.text(PROMPT)


def test_an_html_error_page_is_retried_like_any_5xx(llm, chat_server):
    chat_server.script(malformed("<html><body>502 Bad Gateway</body></html>", status=502), "Marfan syndrome")
    assert llm.text(PROMPT) == "Marfan syndrome"


def test_bodies_of_the_wrong_shape_do_not_crash(llm, chat_server):
    chat_server.script({"choices": "none"}, malformed('{"choices": [{"message": {"content": "cut', "application/json"),
                       {"choices": [{"message": {"content": 42}, "finish_reason": 7}], "usage": {"prompt_tokens": "x"}})
    assert llm.text(PROMPT) == "42"
    assert llm.usage.prompt_tokens == 0 and llm.usage.retries == 2


def test_huge_garbage_answers_fail_cleanly(llm, chat_server):
    garbage = "{[" * 400_000 + "lorem ipsum " * 100_000
    chat_server.script(garbage, garbage)
    start = time.monotonic()
    result = llm.json(PROMPT, SCHEMA)
    assert not result.ok and result.value is None and len(result.raw) < 200_000
    assert time.monotonic() - start < 8


def test_a_null_message_and_a_wrongly_typed_answer_are_reasked(llm, chat_server):
    chat_server.script({"choices": [{"message": None}]}, '{"diseases": [1, 2]}')
    result = llm.json(PROMPT, SCHEMA)
    assert not result.ok and "expected string, got integer 1" in result.error


# The cache.

def test_a_cached_answer_costs_no_call(llm, chat_server):
    chat_server.script("Marfan syndrome")
    assert llm.text(PROMPT) == llm.text(PROMPT) == "Marfan syndrome"
    assert len(chat_server.requests) == 1
    assert (llm.usage.calls, llm.usage.cache_hits) == (1, 1)


def test_the_key_covers_every_parameter(llm, chat_server):
    chat_server.script("a", "b", "c", "d")
    assert [llm.text(PROMPT), llm.text(PROMPT, temperature=0.7), llm.text(PROMPT, max_tokens=5),
            llm.text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}])] == list("abcd")
    assert len(chat_server.requests) == 4 and chat_server.requests[2]["max_tokens"] == 5


def test_the_cache_persists_across_instances_and_processes(make_llm, chat_server, tmp_path):
    chat_server.script('{"diseases": ["Marfan syndrome"]}', "Marfan syndrome")
    first = make_llm()
    assert first.json(PROMPT, SCHEMA).ok and first.text(PROMPT) == "Marfan syndrome"
    first.close()
    second = make_llm()
    result = second.json(PROMPT, SCHEMA)
    assert result.ok and result.cached and second.usage.calls == 0 and second.usage.cache_hits == 1
    script = ("import sys; from kqe_rdf.llm.client import LLM; "
              "llm = LLM('scripted-model', sys.argv[1], cache=sys.argv[2], max_retries=0); "
              "print(llm.text(sys.argv[3]), llm.usage.cache_hits)")
    out = subprocess.run([sys.executable, "-c", script, chat_server.url, str(tmp_path / "llm.sqlite"), PROMPT],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Marfan syndrome 1"
    assert len(chat_server.requests) == 2


def test_empty_answers_are_not_cached(llm, chat_server):
    chat_server.script("", "Marfan syndrome")
    assert llm.text(PROMPT) == ""
    assert llm.text(PROMPT) == "Marfan syndrome"


def test_concurrent_callers_share_one_cache(make_llm, chat_server):
    llm = make_llm()
    chat_server.script(*[lambda request: request["messages"][-1]["content"].upper()] * 16)
    prompts = [f"prompt {i}" for i in range(16)]
    answers: dict[str, str] = {}

    def ask(prompt):
        answers[prompt] = llm.text(prompt)

    threads = [threading.Thread(target=ask, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == {p: p.upper() for p in prompts}
    other = make_llm()
    assert [other.text(p) for p in prompts] == [p.upper() for p in prompts]
    assert len(chat_server.requests) == 16 and other.usage.cache_hits == 16


def test_the_cache_can_be_switched_off(chat_server):
    settings = Settings.load(env={"OPENAI_BASE_URL": chat_server.url, "KQE_LLM_MODEL": "m", "KQE_LLM_CACHE": "off"})
    with LLM.from_settings(settings) as llm:
        chat_server.script("a", "b")
        assert (llm.text(PROMPT), llm.text(PROMPT)) == ("a", "b")
        assert llm.cache is None


# Budgets and usage.

def test_usage_sums_tokens(llm, chat_server):
    chat_server.script(Reply("one", usage=(10, 5)), Reply('{"diseases": ["x"]}', usage=(7, 3)))
    llm.text("first")
    llm.json("second", SCHEMA)
    llm.text("first")  # from the cache: no new tokens, but what the answer cost is kept apart
    assert llm.usage == Usage(calls=2, cache_hits=1, prompt_tokens=17, completion_tokens=8, cached_tokens=15)
    assert llm.usage.total_tokens == 25 and llm.usage.as_dict()["total_tokens"] == 25


def test_a_call_budget_is_checked_before_calling(llm, chat_server):
    chat_server.script("one", "two")
    with llm.budget(calls=1) as budget:
        assert llm.text("first") == "one"
        assert llm.text("first") == "one"  # cached: free
        with pytest.raises(BudgetExceeded, match="1 of 1 calls"):
            llm.text("second")
    assert len(chat_server.requests) == 1
    assert budget.usage.calls == 1 and budget.usage.cache_hits == 1
    assert llm.text("second") == "two"  # outside the block, no limit


def test_a_token_budget_is_checked_before_calling(llm, chat_server):
    chat_server.script(Reply("one", usage=(15, 10)), "two")
    budget = Budget(tokens=20)
    llm.text("first", budget=budget)
    with pytest.raises(BudgetExceeded, match="25 of 20 tokens"):
        llm.text("second", budget=budget)
    assert len(chat_server.requests) == 1


def test_budgets_nest_and_default_to_the_settings(make_llm, chat_server):
    llm = make_llm(max_calls_per_query=2)
    chat_server.script("a", "b", "c")
    with llm.budget() as query:
        assert query.calls == 2
        with llm.budget(calls=5) as step:
            llm.text("1")
            llm.text("2")
            with pytest.raises(BudgetExceeded):
                llm.text("3")
    assert step.usage.calls == query.usage.calls == 2


def test_a_budget_that_runs_out_before_the_reask_gives_a_failed_result(llm, chat_server):
    chat_server.script('{"diseases": "Marfan"}')
    result = llm.json(PROMPT, SCHEMA, budget=Budget(calls=1))
    assert not result.ok and "budget" in result.error and result.raw == '{"diseases": "Marfan"}'
    with pytest.raises(BudgetExceeded):
        llm.json(PROMPT + "?", SCHEMA, budget=Budget(calls=0))


# Configuration.

def test_environment_variables_configure_the_llm(chat_server, tmp_path):
    settings = Settings.load(env={"OPENAI_BASE_URL": chat_server.url, "OPENAI_API_KEY": "sk-test-123",
                                  "KQE_LLM_MODEL": "scripted-model", "KQE_LLM_CACHE": str(tmp_path / "c.sqlite")})
    assert "sk-test-123" not in repr(settings)
    with LLM.from_settings(settings) as llm:
        chat_server.script("Marfan syndrome")
        assert llm.text(PROMPT) == "Marfan syndrome"
    assert chat_server.requests[0]["model"] == "scripted-model"
    assert chat_server.headers[0]["authorization"] == "Bearer sk-test-123"
    assert describe_llm(settings) == f"model scripted-model at {chat_server.url}"
    assert (tmp_path / "c.sqlite").is_file()


def test_kqe_variables_and_the_config_file_beat_the_openai_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    openai_env = {"OPENAI_BASE_URL": "http://openai-env/v1", "OPENAI_API_KEY": "from-env"}
    assert Settings.load(env={**openai_env, "KQE_LLM_BASE_URL": "http://kqe/v1"}).llm.base_url == "http://kqe/v1"
    (tmp_path / "kqe-rdf.toml").write_text('[kqe-rdf]\nllm_base_url = "http://file/v1"\nllm_timeout = 5\n')
    settings = Settings.load(env=openai_env)
    assert (settings.llm.base_url, settings.llm.api_key, settings.llm.timeout) == ("http://file/v1", "from-env", 5.0)


def test_bad_llm_settings_are_refused():
    from kqe_rdf.core.errors import KqeError
    with pytest.raises(KqeError, match="llm_base_url must be an http"):
        Settings(llm_base_url="localhost:8000")
    with pytest.raises(KqeError, match="llm_timeout"):
        Settings.load(env={"KQE_LLM_TIMEOUT": "0"})


def test_no_configuration_means_no_llm():
    settings = Settings.load(env={"OPENAI_API_KEY": "sk-a-key-alone-is-not-a-choice-of-model"})
    assert LLM.from_settings(settings) is None
    assert describe_llm(settings) == "offline (no LLM configured)"


def test_a_base_url_alone_uses_the_first_model_the_server_lists(chat_server, tmp_path):
    chat_server.models = ["qwen2.5-7b-instruct", "other"]
    with LLM.from_settings(Settings(llm_base_url=chat_server.url, llm_cache=tmp_path / "c.sqlite")) as llm:
        chat_server.script("ok")
        assert llm.text("hi") == "ok" and llm.model == "qwen2.5-7b-instruct"
    assert chat_server.requests[0]["model"] == "qwen2.5-7b-instruct"
    assert chat_server.paths == ["/v1/models", "/v1/chat/completions"]


def test_extract_json_is_usable_on_its_own():
    assert extract_json("noise ```\n[1, 2]\n``` more noise") == [1, 2]
    with pytest.raises(ValueError, match="no JSON"):
        extract_json("<html>Service Unavailable</html>")
    assert json.dumps(extract_json('{"a": "b"}')) == '{"a": "b"}'
