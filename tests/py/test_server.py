"""test_server.py: `lily serve` end to end with the official openai client and curl, on a tiny
random-weight model: non-streaming and streaming chat, usage, stop strings, max_tokens, seeds,
logprobs, completions, early-closed streams, concurrent clients, prefix reuse across turns.

    LILY_BIN=build/lily .venv/bin/python -m pytest -q tests/py/test_server.py
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from lily_server import Server, make_model  # noqa: E402

MSGS = [{"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three prime numbers."}]


@pytest.fixture(scope="module")
def model():
    d = tempfile.mkdtemp(prefix="lily-model-")
    yield make_model(d)
    import shutil
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def srv(model):
    s = Server(model, "--ctx", "2048", "--snapshot-every", "64", "--keepalive", "1")
    yield s
    s.stop()


NO_END = {"4087": -100, "4089": -100}  # <|endoftext|>, <|im_end|> of the small tokenizer


def chat(srv, **kw):
    # Random weights may sample an end token at any step: forbid the two end tokens by default so
    # that replies end by length where a test counts tokens (a test may pass its own logit_bias).
    args = dict(model="whatever", messages=MSGS, max_tokens=12, seed=1, logit_bias=NO_END)
    args.update(kw)
    return srv.client().chat.completions.create(**args)


def test_models_and_health(srv):
    ms = srv.client().models.list()
    assert [m.id for m in ms.data] == ["tiny"]
    st, _, b = srv.get("/health")
    assert st == 200 and json.loads(b)["status"] == "ok"
    st, _, b = srv.get("/v1/models/anything")
    assert st == 200 and json.loads(b)["id"] == "tiny"


def test_non_streaming(srv):
    r = chat(srv, max_tokens=10)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion"
    assert r.model == "tiny" and r.created > 0
    c = r.choices[0]
    assert c.finish_reason == "length" and c.message.role == "assistant"
    assert r.usage.completion_tokens == 10
    assert r.usage.prompt_tokens > 10
    assert r.usage.total_tokens == r.usage.prompt_tokens + 10
    assert r.usage.prompt_tokens_details.cached_tokens >= 0


def test_streaming_matches_non_streaming(srv):
    kw = dict(max_tokens=16, seed=5, temperature=1.0)
    r = chat(srv, **kw)
    full = (getattr(r.choices[0].message, "reasoning_content", None) or "") + \
        (r.choices[0].message.content or "")
    chunks = list(chat(srv, stream=True, stream_options={"include_usage": True}, **kw))
    assert chunks[0].choices[0].delta.role == "assistant"
    ids = {c.id for c in chunks}
    assert len(ids) == 1
    text, finishes = "", []
    for c in chunks[:-1]:
        d = c.choices[0].delta
        text += (getattr(d, "reasoning_content", None) or "") + (d.content or "")
        if c.choices[0].finish_reason:
            finishes.append(c.choices[0].finish_reason)
        assert c.usage is None
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 16
    assert text == full


def test_stream_helper_and_no_usage(srv):
    chunks = list(chat(srv, stream=True, max_tokens=4))
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_seed_determinism(srv):
    a = chat(srv, seed=11, max_tokens=16, temperature=1.0)
    b = chat(srv, seed=11, max_tokens=16, temperature=1.0)
    c = chat(srv, seed=12, max_tokens=16, temperature=1.0)

    def text(r):
        m = r.choices[0].message
        return (getattr(m, "reasoning_content", None) or "") + (m.content or "")
    assert text(a) == text(b)
    assert text(a) != text(c)


def test_max_tokens_and_max_completion_tokens(srv):
    r = chat(srv, max_tokens=3)
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"
    # max_completion_tokens wins when both are given
    r = srv.client().chat.completions.create(model="m", messages=MSGS, max_tokens=9,
                                             max_completion_tokens=2)
    assert r.usage.completion_tokens == 2


def _greedy_tokens(srv, n=24):
    """Greedy content and its tokens (thinking off: no reasoning split; logprobs give tokens)."""
    r = chat(srv, temperature=0, max_tokens=n, logprobs=True, top_logprobs=2,
             extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    toks = [t.token for t in r.choices[0].logprobs.content]
    return r.choices[0].message.content, toks


def test_logprobs(srv):
    r = chat(srv, max_tokens=5, logprobs=True, top_logprobs=3)
    lp = r.choices[0].logprobs.content
    assert len(lp) == 5
    for e in lp:
        assert e.logprob <= 0 and len(e.top_logprobs) == 3
        assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob
        assert bytes(e.bytes).decode("utf-8", "replace") is not None


def test_stop_string_spanning_tokens(srv):
    text, toks = _greedy_tokens(srv)
    assert "".join(toks) == text
    # A stop string made of the end of one token and the start of the next.
    pos, stop = 0, None
    for i in range(3, len(toks) - 1):
        pos = sum(len(t) for t in toks[:i])
        if len(toks[i - 1]) >= 1 and len(toks[i]) >= 1:
            stop = toks[i - 1][-1:] + toks[i][:2]
            start = pos - 1
            if text.find(stop) == start:
                break
        stop = None
    assert stop, "no usable token boundary in %r" % toks
    r = chat(srv, temperature=0, max_tokens=24, stop=[stop, "zzzz-never"],
             extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].message.content == text[:text.find(stop)]
    # The same in a stream: the stop text never leaks, even partially.
    chunks = list(chat(srv, temperature=0, max_tokens=24, stop=stop, stream=True,
                       extra_body={"chat_template_kwargs": {"enable_thinking": False}}))
    got = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert got == text[:text.find(stop)]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_completions(srv):
    c = srv.client()
    r = c.completions.create(model="x", prompt="Once upon a time", max_tokens=6, seed=3,
                             temperature=0)
    assert r.object == "text_completion" and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 6
    s = list(c.completions.create(model="x", prompt="Once upon a time", max_tokens=6, seed=3,
                                  temperature=0, stream=True))
    assert "".join(x.choices[0].text for x in s) == r.choices[0].text
    r2 = c.completions.create(model="x", prompt="Once upon a time", max_tokens=6, temperature=0,
                              logprobs=2)
    assert len(r2.choices[0].logprobs.tokens) == 6


def test_completions_streaming_logprobs(srv):
    """Streamed legacy logprobs: per-chunk parallel arrays that join into the non-streaming ones
    (text_offset continuing across chunks)."""
    args = dict(model="x", prompt="Once upon a time", max_tokens=6, temperature=0, logprobs=3,
                logit_bias=NO_END)
    c = srv.client()
    r = c.completions.create(**args).choices[0]
    s = [x.choices[0] for x in c.completions.create(stream=True, **args) if x.choices]
    assert s[-1].finish_reason == "length" and "".join(x.text for x in s) == r.text
    lps = [x.logprobs for x in s if x.logprobs]
    assert len(lps) == 6 and all(len(x.tokens) == 1 for x in lps)
    assert [t for x in lps for t in x.tokens] == r.logprobs.tokens
    assert [o for x in lps for o in x.text_offset] == r.logprobs.text_offset
    assert r.logprobs.text_offset[0] == 0
    got = [v for x in lps for v in x.token_logprobs]
    assert got == pytest.approx(r.logprobs.token_logprobs, abs=1e-4)
    for a, b in zip([t for x in lps for t in x.top_logprobs], r.logprobs.top_logprobs):
        assert len(a) == len(b) == 3 and a.keys() == b.keys()
    # Without logprobs the chunks carry "logprobs": null; out of range is a 400.
    s = list(c.completions.create(model="x", prompt="Once", max_tokens=3, stream=True))
    assert all(x.choices[0].logprobs is None for x in s if x.choices)
    for bad in (-1, 21):
        st, _, b = srv.post("/v1/completions", {"prompt": "a", "logprobs": bad, "stream": True})
        assert st == 400 and json.loads(b)["error"]["param"] == "logprobs"


def test_curl_streaming(srv):
    # The end tokens banned (NO_END): unseeded, the random model sampled one within 5 tokens in ~1 of
    # 150 requests, and the reply then ended by "stop" (seen once in CI).
    body = json.dumps({"model": "m", "messages": MSGS, "max_tokens": 5, "stream": True, "logit_bias": NO_END})
    out = subprocess.run(["curl", "-sN", "--max-time", "60", srv.url + "/v1/chat/completions",
                          "-H", "Content-Type: application/json", "-d", body],
                         capture_output=True, timeout=90).stdout.decode()
    events = [e for e in out.split("\n\n") if e.strip() and not e.startswith(":")]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    objs = [json.loads(e[6:]) for e in events[:-1]]
    assert objs[0]["choices"][0]["delta"]["role"] == "assistant"
    assert objs[-1]["choices"][0]["finish_reason"] == "length"
    out = subprocess.run(["curl", "-s", "-i", "--max-time", "60", srv.url + "/v1/chat/completions",
                          "-d", json.dumps({"model": "m", "messages": MSGS, "max_tokens": 2})],
                         capture_output=True, timeout=90).stdout.decode()
    assert out.startswith("HTTP/1.1 200") and "application/json" in out


def test_early_closed_stream_frees_the_engine(srv):
    before = srv.metrics()
    import http.client
    body = {"model": "m", "messages": MSGS, "max_tokens": 1500, "stream": True,
            "temperature": 1.0}
    h = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    h.request("POST", "/v1/chat/completions", json.dumps(body),
              {"Content-Type": "application/json"})
    resp = h.getresponse()
    assert resp.status == 200
    n = 0
    while n < 3:
        if resp.readline().startswith(b"data: "):
            n += 1
    h.sock.shutdown(2)
    h.close()
    # The generation is cancelled within a moment, far before 1500 tokens.
    deadline = time.time() + 20
    while time.time() < deadline:
        m = srv.metrics()
        if m["lily_requests_cancelled_total"] > before["lily_requests_cancelled_total"] and \
                m["lily_busy"] == 0:
            break
        time.sleep(0.05)
    m = srv.metrics()
    assert m["lily_requests_cancelled_total"] == before["lily_requests_cancelled_total"] + 1
    assert m["lily_generated_tokens_total"] - before["lily_generated_tokens_total"] < 1500
    r = chat(srv, max_tokens=2)  # still serving
    assert r.usage.completion_tokens == 2


def test_concurrent_clients_served_in_order(srv):
    results, errors = {}, []
    clients = [srv.client() for _ in range(6)]

    def worker(i):
        try:
            r = clients[i].chat.completions.create(model="m", messages=MSGS, max_tokens=150, logit_bias=NO_END,
                                                   seed=i, temperature=1.0)
            results[i] = (time.time(), r.usage.completion_tokens)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = []
    base = srv.metrics()["lily_requests_total"]
    for i in range(6):
        t = threading.Thread(target=worker, args=(i,))
        t.start()
        threads.append(t)
        # Arrival order 0..5: wait until the server has counted request i before sending i+1 (a
        # fixed sleep let a slow thread on a loaded machine arrive out of order).
        deadline = time.time() + 30
        while srv.metrics()["lily_requests_total"] < base + i + 1 and time.time() < deadline:
            time.sleep(0.01)
    for t in threads:
        t.join(120)
    assert not errors and len(results) == 6
    assert all(n == 150 for _, n in results.values())
    done = sorted(results, key=lambda i: results[i][0])
    assert done == list(range(6))


def test_second_turn_reuses_the_prefix(srv):
    """The real multi-turn pattern: the template drops turn 1's reasoning from the history, so the
    snapshot before turn 1's generation prompt is what turn 2 resumes from."""
    msgs = [{"role": "system", "content": "Prefix test %f" % time.time()},
            {"role": "user", "content": "Tell me about hash tables."}]
    c = srv.client()
    r1 = c.chat.completions.create(model="m", messages=msgs, max_tokens=20, seed=2)
    assert r1.usage.prompt_tokens_details.cached_tokens == 0
    m = r1.choices[0].message
    msgs2 = msgs + [{"role": "assistant", "content": m.content or "answer",
                     "reasoning_content": getattr(m, "reasoning_content", None) or ""},
                    {"role": "user", "content": "And tries?"}]
    before = srv.metrics()
    r2 = c.chat.completions.create(model="m", messages=msgs2, max_tokens=4, seed=2)
    after = srv.metrics()
    cached = r2.usage.prompt_tokens_details.cached_tokens
    # Turn 2 resumes right before turn 1's generation prompt ("<|im_start|>assistant\n<think>\n",
    # 7 tokens with the small tokenizer; a few more while tok_encode_spans leaves the fixture's
    # normalized <think> unmatched).
    assert r1.usage.prompt_tokens - 12 <= cached < r1.usage.prompt_tokens
    prefilled = (after["lily_prompt_tokens_total"] - before["lily_prompt_tokens_total"]) - \
        (after["lily_prompt_tokens_cached_total"] - before["lily_prompt_tokens_cached_total"])
    assert prefilled == r2.usage.prompt_tokens - cached < r2.usage.prompt_tokens


def test_long_prompt_periodic_snapshots(srv):
    # A prompt past several snapshot intervals (64 tokens here), then the same prompt with a
    # different ending: the shared part comes from a periodic snapshot.
    base = "word " * 300
    c = srv.client()
    r1 = c.completions.create(model="m", prompt=base + "alpha", max_tokens=1)
    assert r1.usage.prompt_tokens > 200
    st, _, b = srv.post("/v1/completions", {"prompt": base + "beta gamma", "max_tokens": 1})
    u = json.loads(b)["usage"]
    assert u["prompt_tokens_details"]["cached_tokens"] >= 64
    assert u["prompt_tokens_details"]["cached_tokens"] % 64 == 0


def test_resumed_prompts_give_the_same_tokens(model, srv):
    """What a snapshot restores is exactly the state it saved: greedy completions that resume from
    the cache (a whole-prompt hit, and a periodic snapshot plus new tokens) match a server without a
    cache, token for token and logprob for logprob (the CPU backend's logits do not depend on how a
    prompt is split into pieces)."""
    ref = Server(model, "--ctx", "2048", "--cache-mb", "0")
    try:
        base = "cache check %f " % time.time() + "lorem ipsum " * 80
        outs = {}
        for name, s in (("cached", srv), ("fresh", ref)):
            for prompt in (base, base, base + "dolor sit amet"):
                st, _, b = s.post("/v1/completions", {"prompt": prompt, "max_tokens": 6, "temperature": 0,
                                                      "logprobs": 1, "logit_bias": NO_END})
                assert st == 200, b
                ch = json.loads(b)["choices"][0]
                outs.setdefault(name, []).append((ch["text"], ch["logprobs"]["token_logprobs"]))
        assert outs["cached"] == outs["fresh"]
        st, _, b = srv.post("/v1/completions", {"prompt": base + "dolor sit amet", "max_tokens": 1})
        assert json.loads(b)["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    finally:
        ref.stop()


def test_greedy_stop_then_resume_matches_fresh(model, srv):
    """A plain greedy reply (the backend's greedy step) cut by a stop string that is a whole token,
    then a prompt that continues through that token: the caching server, which resumes from the
    state the cut left, and one without a cache give the same tokens (and the engine's check that
    the state covers exactly the tokens it records holds)."""
    ref = Server(model, "--ctx", "2048", "--cache-mb", "0")
    try:
        prompt = "stop resume check %f " % time.time() + "lorem ipsum " * 20
        body = {"prompt": prompt, "max_tokens": 16, "temperature": 0} # plain greedy: the greedy step
        st, _, b = srv.post("/v1/completions", dict(body, logprobs=1))
        assert st == 200, b
        ch = json.loads(b)["choices"][0]
        full, toks = ch["text"], ch["logprobs"]["tokens"]
        # A token whose text first appears where it starts: as a stop string it cuts just before it.
        i = next((i for i in range(2, len(toks) - 2)
                  if len(toks[i]) >= 2 and full.find(toks[i]) == len("".join(toks[:i]))), None)
        if i is None:
            pytest.skip("no token usable as a stop string in %r" % toks)
        cut = "".join(toks[:i])
        outs = {}
        for name, s in (("cached", srv), ("fresh", ref)):
            st, _, b = s.post("/v1/completions", dict(body, stop=[toks[i]]))
            assert st == 200, b
            ch = json.loads(b)["choices"][0]
            assert ch["text"] == cut and ch["finish_reason"] == "stop"
            st, _, b = s.post("/v1/completions", {"prompt": prompt + cut + toks[i] + toks[i + 1], "max_tokens": 6,
                                                  "temperature": 0, "logprobs": 1, "logit_bias": NO_END})
            assert st == 200, b
            ch = json.loads(b)["choices"][0]
            outs[name] = (ch["text"], ch["logprobs"]["token_logprobs"])
        assert outs["cached"] == outs["fresh"]
    finally:
        ref.stop()


def test_greedy_step_matches_the_sampler(srv):
    """Plain greedy requests take the backend's greedy step (the next id without the logits); with
    logprobs the engine's sampler takes the argmax of the logits instead: the same tokens."""
    outs = []
    for extra in ({}, {"logprobs": 1}, {"temperature": 1.0, "top_k": 1}):
        body = dict({"prompt": "Greedy step check %f, tell me" % time.time() if not outs else outs[0][0],
                     "max_tokens": 24, "temperature": 0}, **extra)
        st, _, b = srv.post("/v1/completions", body)
        assert st == 200, b
        r = json.loads(b)
        outs.append((body["prompt"], r["choices"][0]["text"], r["choices"][0]["finish_reason"],
                     r["usage"]["completion_tokens"]))
    assert outs[0] == outs[1] == outs[2]


def same_as_full_path(srv, kw, tag, seed):
    """A seeded completion with the sampling settings kw, as it is and with logprobs (0 of them), which
    change no logit but send the request through the sampler on the full logits: the same text."""
    outs = []
    for extra in ({}, {"logprobs": 0}):
        body = dict({"prompt": "%s %f" % (tag, time.time()) if not outs else outs[0][0], "max_tokens": 24,
                     "seed": seed}, **kw, **extra)
        st, _, b = srv.post("/v1/completions", body)
        assert st == 200, b
        r = json.loads(b)
        outs.append((body["prompt"], r["choices"][0]["text"], r["usage"]["completion_tokens"]))
    assert outs[0] == outs[1], (kw, outs)


def test_topk_step_matches_the_sampler(srv):
    """Sampled requests with a top_k of at most 64 (and no logprobs) draw from the backend's top-k
    step (the k largest logits without the rest), their logit bias and penalties applied where the
    logits are; greedy requests with a bias or penalties take its largest alone. Asking for logprobs
    (0 of them) changes no logit but sends the request through the sampler on the full logits: the
    same tokens for the same seed, for several settings."""
    for i, kw in enumerate(({"temperature": 0.8, "top_k": 20}, {"temperature": 1.3, "top_k": 64, "top_p": 0.9},
                            {"temperature": 0.6, "top_k": 5, "top_p": 0.95, "min_p": 0.05},
                            {"temperature": 0.7, "top_k": 20, "presence_penalty": 1.5},
                            {"temperature": 0.9, "top_k": 40, "frequency_penalty": 0.8, "repetition_penalty": 1.2,
                             "logit_bias": {"17": 3, "300": -2.5}},
                            {"temperature": 0, "presence_penalty": 2, "logit_bias": {"17": 4}},
                            {"temperature": 0.6, "top_k": 1, "repetition_penalty": 1.5})):
        same_as_full_path(srv, kw, "Top-k step check %d" % i, 1234 + i)


def test_topp_step_matches_the_sampler(srv):
    """Sampled requests with top_p and/or min_p and no top_k draw from the backend's top-k step with
    the softmax's mass when the 64 largest logits decide the draw (a low temperature: a peaked
    distribution), else from the step's whole logits (with a bias or penalties, those edited where
    they are); logprobs send them through the sampler on the full logits: the same tokens for the
    same seed, in every case."""
    for i, kw in enumerate(({"temperature": 0.15, "top_p": 0.9}, {"temperature": 0.2, "min_p": 0.1},
                            {"temperature": 0.25, "top_p": 0.8, "min_p": 0.05}, {"temperature": 1.0, "top_p": 0.95},
                            {"temperature": 0.9, "min_p": 0.02},
                            {"temperature": 0.2, "top_p": 0.9, "presence_penalty": 1.0, "logit_bias": {"17": 2}},
                            {"temperature": 1.0, "top_p": 0.95, "frequency_penalty": 0.5, "repetition_penalty": 1.1})):
        same_as_full_path(srv, kw, "Top-p step check %d" % i, 4321 + i)


def test_metrics_text(srv):
    m = srv.metrics()
    for k in ("lily_requests_total", "lily_prompt_tokens_total", "lily_generated_tokens_total",
              "lily_prefill_tokens_per_second", "lily_decode_tokens_per_second",
              "lily_queue_depth", "lily_prefix_cache_hits_total"):
        assert k in m
    assert m["lily_prefix_cache_hits_total"] >= 1


# ---------------------------------------------------------------------------------------------
# Scripted output (LILY_TEST_OUTPUT): the model still runs, but emits a fixed text, so tool calls
# and the reasoning split can be driven through the whole server path.

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]
SCRIPT = ("The user wants weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n"
          "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
          "</function>\n</tool_call>")


@pytest.fixture(scope="module")
def scripted(model):
    s = Server(model, env={"LILY_TEST_OUTPUT": SCRIPT})
    yield s
    s.stop()


def test_tool_round_trip(scripted):
    c = scripted.client()
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    r = c.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=200)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls"
    assert ch.message.reasoning_content == "The user wants weather."
    call = ch.message.tool_calls[0]
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 3}
    # Send the result back: the assistant turn with its tool call and the tool message.
    msgs += [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
             {"role": "tool", "tool_call_id": call.id, "content": "{\"temp\": 18}"}]
    r2 = c.chat.completions.create(model="m", messages=msgs, tools=TOOLS, max_tokens=200)
    assert r2.choices[0].finish_reason == "tool_calls"
    assert r2.usage.prompt_tokens > r.usage.prompt_tokens
    # Turn 2 continues after turn 1's assistant turn: at least turn 1's conversation up to its
    # generation prompt comes from a snapshot.
    assert r2.usage.prompt_tokens_details.cached_tokens >= r.usage.prompt_tokens - 12
    # Streaming: tool-call deltas carry index, id, type, name and arguments.
    chunks = list(c.chat.completions.create(model="m", messages=msgs[:1], tools=TOOLS,
                                            max_tokens=200, stream=True))
    tc = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    assert len(tc) == 1 and tc[0].index == 0 and tc[0].function.name == "get_weather"
    assert json.loads(tc[0].function.arguments) == {"city": "Paris", "days": 3}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    reasoning = "".join(getattr(ch.choices[0].delta, "reasoning_content", None) or ""
                        for ch in chunks if ch.choices)
    assert reasoning == "The user wants weather."
    # tool_choice none: the tools are not shown and the output stays text.
    r3 = c.chat.completions.create(model="m", messages=msgs[:1], tools=TOOLS, tool_choice="none",
                                   max_tokens=200)
    assert r3.choices[0].finish_reason == "stop" and not r3.choices[0].message.tool_calls
    assert r3.usage.prompt_tokens < r.usage.prompt_tokens


def test_reasoning_split_and_input_aliases(scripted):
    c = scripted.client()
    r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    m = r.choices[0].message
    assert m.reasoning_content == "The user wants weather."
    assert "<tool_call>" in m.content and "</think>" not in m.content
    # Both reasoning_content (llama.cpp) and reasoning (vLLM) are accepted on input, and render
    # the same prompt.
    def turn(key):
        h = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", key: "r"},
             {"role": "tool", "content": "x"}]
        return c.chat.completions.create(model="m", messages=h, max_tokens=1).usage.prompt_tokens
    assert turn("reasoning_content") == turn("reasoning")


def test_reasoning_tokens(scripted, model):
    """usage.completion_tokens_details.reasoning_tokens counts the generated tokens up to and
    including </think>, as `lily tokenize` splits the reasoning part of the script."""
    from lily_server import LILY
    reasoning = SCRIPT[:SCRIPT.index("</think>") + len("</think>")]
    out = subprocess.run([LILY, "tokenize", "--model", model, "--text", reasoning],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    want = len(json.loads(out))
    assert want > 2
    c = scripted.client()
    msgs = [{"role": "user", "content": "hi"}]
    r = c.chat.completions.create(model="m", messages=msgs)
    assert r.usage.completion_tokens_details.reasoning_tokens == want
    assert r.usage.completion_tokens > want
    chunks = list(c.chat.completions.create(model="m", messages=msgs, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == want
    # Cut inside the reasoning: every generated token is reasoning.
    r = c.chat.completions.create(model="m", messages=msgs, max_tokens=3)
    assert r.usage.completion_tokens_details.reasoning_tokens == 3
    # Thinking off: the prompt closes <think> itself, so nothing generated is reasoning.
    r = c.chat.completions.create(model="m", messages=msgs, reasoning_effort="none")
    assert r.usage.completion_tokens_details.reasoning_tokens == 0
    assert "</think>" in r.choices[0].message.content
    r = c.completions.create(model="m", prompt="hi", max_tokens=4)
    assert r.usage.completion_tokens_details.reasoning_tokens == 0


def test_chat_template_kwargs_defaults(model, tmp_path):
    """Default chat_template_kwargs: the model directory's (tokenizer_config.json, as models/demo
    ships {"enable_thinking": false}) under `--chat-template-kwargs`, both under the request's own.
    Seen through usage: with thinking off the prompt already holds an empty think block (longer
    prompt) and nothing generated is reasoning; the scripted output starts inside <think>."""
    import shutil
    from lily_server import LILY
    d = tmp_path / "m"
    shutil.copytree(model, d)
    cfg_path = d / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template_kwargs"] = {"enable_thinking": False}
    cfg_path.write_text(json.dumps(cfg))
    msgs = [{"role": "user", "content": "hi"}]

    def usage(srv, **kw):
        r = srv.client().chat.completions.create(model="m", messages=msgs, max_tokens=3, **kw)
        return r.usage.prompt_tokens, r.usage.completion_tokens_details.reasoning_tokens

    s = Server(str(d), env={"LILY_TEST_OUTPUT": SCRIPT})
    try:
        off = usage(s)
        on = usage(s, extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    finally:
        s.stop()
    assert off[1] == 0 and on[1] == 3 and off[0] > on[0]
    s = Server(str(d), "--chat-template-kwargs", '{"enable_thinking": true}',
               env={"LILY_TEST_OUTPUT": SCRIPT})
    try:
        assert usage(s) == on
    finally:
        s.stop()
    # A bad default is a one-line error at start-up, naming its source.
    for args, where in ((["--chat-template-kwargs", "[1]"], "--chat-template-kwargs"),
                        (["--chat-template-kwargs", "{"], "--chat-template-kwargs"),
                        (["--chat-template-kwargs", '{"enable_thinking": 1}'], "enable_thinking")):
        r = subprocess.run([LILY, "run", "--model", str(d), "-p", "x", "--max-tokens", "1"] + args,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and where in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    cfg["chat_template_kwargs"] = "no"
    cfg_path.write_text(json.dumps(cfg))
    r = subprocess.run([LILY, "run", "--model", str(d), "-p", "x", "--max-tokens", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "tokenizer_config.json" in r.stderr, r.stderr


def test_run_and_chat_cli(model):
    from lily_server import LILY
    r = subprocess.run([LILY, "run", "--model", model, "-p", "hi", "--max-tokens", "5",
                        "--seed", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "5 generated" in r.stderr and "prefill" in r.stderr and "decode" in r.stderr
    r = subprocess.run([LILY, "chat", "--model", model, "--max-tokens", "4", "--no-think"],
                       input="hello\nagain\n/reset\nhello\n/quit\n", capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    stats = [l for l in r.stderr.splitlines() if "prompt tokens" in l]
    assert len(stats) == 3
    assert "conversation reset" in r.stderr
    # The second turn resumed from the first turn's snapshot; after /reset the first prompt is
    # found whole in the cache.
    import re
    cached = [int(re.search(r"\((\d+) cached\)", l)[1]) for l in stats]
    assert cached[1] > 0 and cached[2] > 0
