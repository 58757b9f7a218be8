#!/usr/bin/env python3
"""soak.py: run `lily serve` on loopback and drive it with concurrent clients for a given time,
then check that it held up: every response valid, no crash, memory flat after warm-up, /metrics
counts consistent with what the clients saw.

    .venv/bin/python tools/soak.py --minutes 30 --clients 6            (docs/RELIABILITY.md)
    .venv/bin/python tools/soak.py --seconds 25 --clients 4            (tests/py/test_soak_short.py)

Two servers run on the model (default models/demo): one samples freely, one has
LILY_TEST_OUTPUT set (docs/SERVER.md) so that its every generation is a scripted reasoning + tool
call, which drives the tool-call path. Each client thread loops over a weighted mix of actions:

  chat, chat_stream     openai client; end tokens forbidden by logit_bias (<|endoftext|>/<|im_end|> of the
                        small tokenizer) unless stop strings are tested, so the reply must end by
                        length with exactly max_tokens tokens; random sampling knobs and logprobs
  completion            /v1/completions, streaming or not
  same_seed             a fixed request (4 kinds) with a fixed seed: the output must be identical
                        every time, whatever ran in between (no state leaks between requests)
  multiturn             two turns; the second must resume from a snapshot (cached_tokens > 0)
  long_prompt           1000-3000 tokens of prompt, a few tokens out
  tool                  the scripted server: tool call parsed with the right name and arguments
  cancel_stream         raw HTTP: read a few SSE events, then close the socket
  abort                 raw HTTP: send a request, close after 0-300 ms (queue wait / prefill /
                        decode, whichever it hits)
  bad                   a deliberately bad request (malformed JSON, wrong types and ranges,
                        unknown route, wrong method, over-long prompt, body over --max-body,
                        invalid UTF-8): must be the exact 4xx with an OpenAI error object
  info                  /health, /v1/models, /metrics

A 503 (queue full; the servers run with a small --queue so that it happens) must carry
Retry-After and is retried after a pause; it is counted, not an error.

Memory: VmRSS of each server is sampled every second. Criterion: after warm-up (--warmup, the
first 25% of the run), the mean RSS of the last 10% of samples (at least 3) may exceed the mean of
the first 10% after warm-up by at most max(4 MiB, 5%). The prefix cache is bounded (--cache-mb,
default 16) and fills during warm-up.

/metrics at the end (all clients stopped) must satisfy: 4xx == deliberate bad requests;
5xx == busy rejections == 503s seen (+ at most the aborted requests' unseen answers);
requests_failed == 0; queue empty and engine idle; requests - cancelled between the generations
seen completed and that plus the aborted ones; cancelled <= aborted; generated tokens >= the sum
of completion_tokens seen. Exit status 0 when everything holds; the summary goes to stdout (and
--json FILE).
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
NO_END = {}  # logit_bias forbidding the model's end tokens; set in main() from its tokenizer


def end_token_bias(lily, model):
    """logit_bias that forbids <|endoftext|> and <|im_end|> of the model's own tokenizer."""
    out = subprocess.run([lily, "tokenize", "--model", model, "--text", "<|endoftext|><|im_end|>"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return {str(i): -100 for i in json.loads(out)}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]
SCRIPT = ("Thinking about the weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n"
          "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
          "</function>\n</tool_call>")
WORDS = ("alpha beta gamma delta river stone cloud seven blue quick lazy dog prime hash table "
         "tree graph node edge ünïcödé 中文 emoji 🙂 tab\tnew\nline").split(" ")
CTX = 4096
MAX_BODY = 1 << 16

WEIGHTS = {"chat": 14, "chat_stream": 14, "completion": 7, "same_seed": 6, "multiturn": 7,
           "long_prompt": 4, "tool": 10, "cancel_stream": 5, "abort": 4, "bad": 12, "info": 4}


class Check(Exception):
    """A response that breaks the contract."""


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


class Server:
    def __init__(self, lily, model, name, cache_mb, env=None, extra=()):
        self.tmp = tempfile.mkdtemp(prefix="lily-soak-")
        pf = os.path.join(self.tmp, "port")
        e = dict(os.environ, LILY_PORT_FILE=pf)
        e.pop("LILY_TEST_OUTPUT", None)
        e.update(env or {})
        self.name = name
        self.log = open(os.path.join(self.tmp, "log"), "w+")
        cmd = [lily, "serve", "--model", model, "--port", "0", "--model-id", "soak",
               "--ctx", str(CTX), "--queue", "3", "--cache-mb", str(cache_mb), "--max-body", str(MAX_BODY),
               "--timeout", "20", "--keepalive", "1"] + list(extra)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=e)
        deadline = time.time() + 120
        self.port = None
        while time.time() < deadline and not self.port:
            if self.proc.poll() is not None:
                raise RuntimeError("lily serve exited: " + self.logs())
            try:
                self.port = int(open(pf).read())
            except (OSError, ValueError):
                time.sleep(0.05)
        if not self.port:
            raise RuntimeError("lily serve did not start")
        while True:
            try:
                if self.raw("GET", "/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        self.rss = []  # (t, kB)
        self.n_own = 1  # responses to the harness's own requests (/health above, /metrics at the end)

    def logs(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def rss_kb(self):
        try:
            for line in open("/proc/%d/status" % self.proc.pid):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            return None

    def raw(self, method, path, body=None, headers=None, timeout=120):
        h = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            hd = {"Content-Type": "application/json"}
            hd.update(headers or {})
            data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
            h.request(method, path, data, hd)
            r = h.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            h.close()

    def metrics(self):
        st, _, b = self.raw("GET", "/metrics")
        self.n_own += 1
        if st != 200:
            raise Check("/metrics: %d" % st)
        out = {}
        for line in b.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.split()
                out[k] = float(v)
        return out

    def stop(self):
        rc = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                rc = "killed after SIGTERM timeout"
        else:
            rc = "exited early: %s" % self.proc.returncode
        if rc != 0:
            rc = "%s; log: %s" % (rc, self.logs()[-2000:])
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return rc


class Stats:
    """What the clients saw, per server (counts must match that server's /metrics)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.actions = {}
        self.errors = []          # (action, message)
        self.srv = {}             # server name -> counters

    def s(self, name):
        return self.srv.setdefault(name, {"responses": 0, "bad": 0, "busy": 0, "gen_ok": 0,
                                          "aborted": 0, "completion_tokens": 0,
                                          "prompt_tokens": 0})

    def add(self, name, **kw):
        with self.lock:
            d = self.s(name)
            for k, v in kw.items():
                d[k] += v

    def action(self, a):
        with self.lock:
            self.actions[a] = self.actions.get(a, 0) + 1

    def error(self, a, msg):
        with self.lock:
            self.errors.append((a, msg))


class Busy(Exception):
    pass


class Client:
    def __init__(self, idx, n_clients, plain, scripted, stats, seed):
        import openai
        self.n_clients = n_clients
        self.openai = openai
        self.i = idx
        self.plain, self.scripted, self.st = plain, scripted, stats
        self.rng = random.Random(seed * 1000 + idx)
        self.oc = {s.name: openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % s.port,
                                         api_key="none", max_retries=0, timeout=120)
                   for s in (plain, scripted)}
        self.same = {}

    # -- helpers --------------------------------------------------------------------------------
    def call(self, srv, fn):
        """Run one openai-client request; a 503 is checked and raised as Busy."""
        try:
            r = fn(self.oc[srv.name])
        except self.openai.APIStatusError as e:
            self.st.add(srv.name, responses=1)
            if e.status_code == 503:
                if e.response.headers.get("retry-after") != "1":
                    raise Check("503 without Retry-After: 1")
                self.st.add(srv.name, busy=1)
                raise Busy()
            raise Check("HTTP %d: %s" % (e.status_code, str(e)[:300]))
        self.st.add(srv.name, responses=1)  # a stream counts once its headers came
        return r

    def usage_ok(self, srv, u, max_tokens=None, exact=False):
        if u is None:
            raise Check("no usage")
        if u.total_tokens != u.prompt_tokens + u.completion_tokens:
            raise Check("usage total %d != %d + %d" % (u.total_tokens, u.prompt_tokens,
                                                        u.completion_tokens))
        if max_tokens and (u.completion_tokens > max_tokens or
                           (exact and u.completion_tokens != max_tokens)):
            raise Check("completion_tokens %d vs max_tokens %d" % (u.completion_tokens, max_tokens))
        self.st.add(srv.name, gen_ok=1, completion_tokens=u.completion_tokens,
                    prompt_tokens=u.prompt_tokens)

    def messages(self, n_words=12):
        msgs = []
        if self.rng.random() < 0.5:
            msgs.append({"role": "system", "content": words(self.rng, 6)})
        msgs.append({"role": "user", "content": words(self.rng, n_words)})
        return msgs

    def sampling(self):
        k = {}
        if self.rng.random() < 0.5:
            k["temperature"] = round(self.rng.uniform(0, 1.5), 2)
        if self.rng.random() < 0.3:
            k["top_p"] = round(self.rng.uniform(0.1, 1), 2)
        if self.rng.random() < 0.2:
            k["presence_penalty"] = 0.5
        if self.rng.random() < 0.3:
            k["seed"] = self.rng.randrange(1 << 31)
        return k

    # -- actions --------------------------------------------------------------------------------
    def a_chat(self):
        mt = self.rng.randint(1, 40)
        stop = ["e", "a b"] if self.rng.random() < 0.2 else None
        lp = self.rng.random() < 0.2
        kw = dict(model="m", messages=self.messages(), max_tokens=mt, logit_bias=NO_END,
                  **self.sampling())
        if stop:
            kw["stop"] = stop
        if lp:
            kw.update(logprobs=True, top_logprobs=3)
        r = self.call(self.plain, lambda c: c.chat.completions.create(**kw))
        ch = r.choices[0]
        if not r.id.startswith("chatcmpl-") or r.object != "chat.completion":
            raise Check("bad id/object %s %s" % (r.id, r.object))
        if ch.finish_reason not in (("stop", "length") if stop else ("length",)):
            raise Check("finish_reason %s" % ch.finish_reason)
        if stop and ch.finish_reason == "stop" and any(s in (ch.message.content or "") for s in stop):
            raise Check("stop string returned")
        if lp and (ch.logprobs is None or len(ch.logprobs.content) != r.usage.completion_tokens):
            raise Check("logprobs count")
        self.usage_ok(self.plain, r.usage, mt, exact=not stop)

    def a_chat_stream(self):
        mt = self.rng.randint(1, 60)
        kw = dict(model="m", messages=self.messages(), max_tokens=mt, logit_bias=NO_END,
                  stream=True, stream_options={"include_usage": True}, **self.sampling())
        stream = self.call(self.plain, lambda c: c.chat.completions.create(**kw))
        chunks = list(stream)
        if not chunks or chunks[0].choices[0].delta.role != "assistant":
            raise Check("first chunk has no role")
        fins = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        if fins != ["length"]:
            raise Check("finish reasons %s" % fins)
        if chunks[-1].choices or chunks[-1].usage is None:
            raise Check("no usage chunk at the end")
        if len({c.id for c in chunks}) != 1:
            raise Check("chunk ids differ")
        self.usage_ok(self.plain, chunks[-1].usage, mt, exact=True)

    def a_completion(self):
        mt = self.rng.randint(1, 30)
        prompt = words(self.rng, self.rng.randint(1, 40))
        if self.rng.random() < 0.5:
            r = self.call(self.plain, lambda c: c.completions.create(
                model="m", prompt=prompt, max_tokens=mt, logit_bias=NO_END))
            if r.choices[0].finish_reason != "length" or not r.id.startswith("cmpl-"):
                raise Check("completion: %s %s" % (r.choices[0].finish_reason, r.id))
            self.usage_ok(self.plain, r.usage, mt, exact=True)
        else:
            s = self.call(self.plain, lambda c: c.completions.create(
                model="m", prompt=prompt, max_tokens=mt, logit_bias=NO_END, stream=True,
                stream_options={"include_usage": True}))
            chunks = list(s)
            fins = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
            if fins != ["length"] or chunks[-1].usage is None:
                raise Check("completion stream: %s" % fins)
            self.usage_ok(self.plain, chunks[-1].usage, mt, exact=True)

    SAME = [
        [{"role": "user", "content": "Determinism one: " + "stone " * 10}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Determinism two"}],
        [{"role": "user", "content": "Determinism three: 中文 🙂 " * 5}],
        [{"role": "user", "content": "Determinism four " + "river " * 80}],
    ]

    def a_same_seed(self):
        k = self.rng.randrange(len(self.SAME))
        st = self.rng.random() < 0.5
        kw = dict(model="m", messages=self.SAME[k], max_tokens=16, logit_bias=NO_END,
                  temperature=0.9, seed=1234 + k)
        if st:
            kw.update(stream=True, stream_options={"include_usage": True})
            chunks = list(self.call(self.plain, lambda c: c.chat.completions.create(**kw)))
            text = "".join((c.choices[0].delta.content or "") +
                           (getattr(c.choices[0].delta, "reasoning_content", None) or "")
                           for c in chunks if c.choices)
            u = chunks[-1].usage
        else:
            r = self.call(self.plain, lambda c: c.chat.completions.create(**kw))
            m = r.choices[0].message
            text = (getattr(m, "reasoning_content", None) or "") + (m.content or "")
            u = r.usage
        self.usage_ok(self.plain, u, 16, exact=True)
        with SAME_LOCK:
            want = SAME_OUT.setdefault(k, text)
        if text != want:
            raise Check("same request and seed, different output: %r vs %r" % (text, want))

    def a_multiturn(self):
        msgs = [{"role": "system", "content": "Client %d conversation %s" % (self.i, words(self.rng, 20))},
                {"role": "user", "content": words(self.rng, 15)}]
        r1 = self.call(self.plain, lambda c: c.chat.completions.create(
            model="m", messages=msgs, max_tokens=8, logit_bias=NO_END))
        self.usage_ok(self.plain, r1.usage, 8, exact=True)
        m = r1.choices[0].message
        msgs += [{"role": "assistant", "content": m.content or "ok",
                  "reasoning_content": getattr(m, "reasoning_content", None) or ""},
                 {"role": "user", "content": words(self.rng, 5)}]
        r2 = self.call(self.plain, lambda c: c.chat.completions.create(
            model="m", messages=msgs, max_tokens=4, logit_bias=NO_END))
        self.usage_ok(self.plain, r2.usage, 4, exact=True)
        cached = r2.usage.prompt_tokens_details.cached_tokens
        with self.st.lock:
            self.st.multiturn = getattr(self.st, "multiturn", [0, 0])
            self.st.multiturn[0 if cached > 0 else 1] += 1
        if not cached < r2.usage.prompt_tokens:
            raise Check("cached %d >= prompt %d" % (cached, r2.usage.prompt_tokens))

    def a_long_prompt(self):
        n = self.rng.randint(1000, 3000)
        body = {"model": "m", "prompt": "word " * n, "max_tokens": 2, "logit_bias": NO_END}
        r = self.call(self.plain, lambda c: c.completions.create(**body))
        if r.usage.prompt_tokens < n // 2:
            raise Check("long prompt counted %d tokens" % r.usage.prompt_tokens)
        self.usage_ok(self.plain, r.usage, 2, exact=True)

    def a_tool(self):
        msgs = [{"role": "user", "content": "Weather in Paris? " + words(self.rng, 3)}]
        if self.rng.random() < 0.5:
            r = self.call(self.scripted, lambda c: c.chat.completions.create(
                model="m", messages=msgs, tools=TOOLS, max_tokens=200))
            ch = r.choices[0]
            if ch.finish_reason != "tool_calls" or len(ch.message.tool_calls or []) != 1:
                raise Check("tool: finish %s calls %s" % (ch.finish_reason, ch.message.tool_calls))
            call = ch.message.tool_calls[0]
            if ch.message.reasoning_content != "Thinking about the weather.":
                raise Check("tool: reasoning %r" % ch.message.reasoning_content)
            args = json.loads(call.function.arguments)
            u = r.usage
            if self.rng.random() < 0.5:  # send the result back
                msgs += [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                         {"role": "tool", "tool_call_id": call.id, "content": "{\"temp\": 18}"}]
                self.usage_ok(self.scripted, u)
                r = self.call(self.scripted, lambda c: c.chat.completions.create(
                    model="m", messages=msgs, tools=TOOLS, max_tokens=200))
                u = r.usage
        else:
            chunks = list(self.call(self.scripted, lambda c: c.chat.completions.create(
                model="m", messages=msgs, tools=TOOLS, max_tokens=200, stream=True,
                stream_options={"include_usage": True})))
            tc = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
            if len(tc) != 1 or tc[0].function.name != "get_weather":
                raise Check("tool stream calls %s" % tc)
            call = tc[0]
            args = json.loads(call.function.arguments)
            if [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] != ["tool_calls"]:
                raise Check("tool stream finish")
            u = chunks[-1].usage
        if call.function.name != "get_weather" or args != {"city": "Paris", "days": 3}:
            raise Check("tool call %s %s" % (call.function.name, args))
        if not call.id.startswith("call_"):
            raise Check("tool call id %s" % call.id)
        self.usage_ok(self.scripted, u)

    def a_cancel_stream(self):
        srv = self.plain
        body = {"model": "m", "messages": self.messages(), "max_tokens": 3000, "stream": True,
                "logit_bias": NO_END}
        h = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        h.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = h.getresponse()
        if r.status == 503:
            r.read()
            h.close()
            self.st.add(srv.name, responses=1, busy=1)
            raise Busy()
        if r.status != 200:
            raise Check("cancel_stream status %d" % r.status)
        want = self.rng.randint(1, 6)
        n = 0
        while n < want:
            line = r.readline()
            if not line:
                raise Check("stream ended before %d events" % want)
            if line.startswith(b"data: "):
                # An error event has a top-level "error" key; the bytes "error" alone can be content
                # (a model's token, seen 2026-11-30: a false failure).
                try:
                    ev = json.loads(line[6:]) if not line.startswith(b"data: [DONE]") else None
                except ValueError:
                    raise Check("cancel_stream: bad event %r" % line[:200])
                if ev is None or "error" in ev:
                    raise Check("cancel_stream: early %r" % line[:200])
                n += 1
        h.sock.shutdown(2)
        h.close()
        self.st.add(srv.name, responses=1, aborted=1)

    def a_abort(self):
        import socket
        srv = self.plain
        body = json.dumps({"model": "m", "messages": self.messages(self.rng.randint(5, 300)),
                           "max_tokens": self.rng.randint(100, 2000), "logit_bias": NO_END,
                           "stream": self.rng.random() < 0.3}).encode()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(self.rng.uniform(0, 0.3))
        s.close()
        self.st.add(srv.name, aborted=1)

    BAD = [
        (400, b"{not json"),
        (400, b""),
        (400, b'{"model":"m","messages":[{"role":"user","content":"\xff\xfe"}]}'),
        (400, {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}),
        (400, {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}),
        (400, {"model": "m", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"99999": 1}}),
        (400, {"model": "m", "messages": []}),
        (400, {"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
        (400, {"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 3}),
        (400, {"model": "m", "messages": [{"role": "system", "content": "only system"}]}),
        (400, "overlong"),
        (400, "overlong_completion"),
        (413, "huge"),
        (404, "route"),
        (405, "method"),
    ]

    def a_bad(self):
        srv = self.plain if self.rng.random() < 0.8 else self.scripted
        want, body = self.rng.choice(self.BAD)
        path, method = "/v1/chat/completions", "POST"
        if body == "overlong":
            body = {"model": "m", "messages": [{"role": "user", "content": "word " * (CTX + 100)}]}
        elif body == "overlong_completion":
            path, body = "/v1/completions", {"model": "m", "prompt": "word " * (CTX + 100)}
        elif body == "huge":
            body = b"{" + b" " * (MAX_BODY + 10) + b"}"
        elif body == "route":
            path, method, body = "/v1/nothing/here", "GET", None
        elif body == "method":
            method, body = "GET", None
        st, h, b = srv.raw(method, path, body)
        self.st.add(srv.name, responses=1, bad=1)
        if st != want:
            raise Check("bad request: want %d got %d: %r" % (want, st, b[:200]))
        e = json.loads(b)["error"]
        if not (isinstance(e.get("message"), str) and e["message"] and "type" in e):
            raise Check("bad error object %r" % b[:200])
        if want == 400 and isinstance(body, dict) and "word word" in json.dumps(body):
            if e.get("code") != "context_length_exceeded" or str(CTX) not in e["message"]:
                raise Check("over-long prompt: %r" % e)

    def a_info(self):
        srv = self.rng.choice([self.plain, self.scripted])
        path = self.rng.choice(["/health", "/v1/models", "/metrics", "/models/x"])
        st, _, b = srv.raw("GET", path)
        self.st.add(srv.name, responses=1)
        if st != 200:
            raise Check("%s: %d" % (path, st))
        if path != "/metrics":
            json.loads(b)

    def run(self, deadline, budget):
        acts = list(WEIGHTS)
        w = [WEIGHTS[a] for a in acts]
        # First every kind once, spread over the clients (so that even a short run covers the
        # whole mix), then at random by weight.
        first = acts[self.i::self.n_clients]
        while time.time() < deadline and budget.take():
            a = first.pop(0) if first else self.rng.choices(acts, w)[0]
            self.st.action(a)
            try:
                getattr(self, "a_" + a)()
            except Busy:
                time.sleep(0.2 + self.rng.random() * 0.5)
            except Check as e:
                self.st.error(a, str(e))
            except Exception as e:  # noqa: BLE001  (a transport error is a failure too)
                self.st.error(a, "%s: %s" % (type(e).__name__, str(e)[:300] or traceback.format_exc()[-300:]))


SAME_LOCK = threading.Lock()
SAME_OUT = {}


class Budget:
    def __init__(self, n):
        self.n, self.lock = n, threading.Lock()

    def take(self):
        with self.lock:
            if self.n <= 0:
                return False
            self.n -= 1
            return True


def rss_check(samples, t0, t1, warmup):
    """(ok, dict): mean RSS of the last 10% of samples vs the 10% after warm-up (the first
    `warmup` fraction of the run); at least 3 samples each."""
    span = t1 - t0
    post = [kb for t, kb in samples if t >= t0 + warmup * span]
    if len(post) < 6:
        return True, {"note": "too few samples"}
    k = max(3, len(post) // 10)
    a = sum(post[:k]) / k
    b = sum(post[-k:]) / k
    allowed = max(4096, 0.05 * a)
    return b - a <= allowed, {"start_kb": samples[0][1], "after_warmup_kb": round(a),
                              "end_kb": round(b), "max_kb": max(kb for _, kb in samples),
                              "growth_kb": round(b - a), "allowed_kb": round(allowed)}


def metrics_check(name, m, s):
    """Problems (list of str) between a server's /metrics and what its clients saw."""
    p = []

    def need(cond, msg):
        if not cond:
            p.append("%s: %s" % (name, msg))
    g = lambda k: int(m["lily_" + k])  # noqa: E731
    need(g("http_client_errors_total") == s["bad"], "4xx %d != bad %d" % (g("http_client_errors_total"), s["bad"]))
    need(s["busy"] <= g("http_server_errors_total") <= s["busy"] + s["aborted"],
         "5xx %d vs busy seen %d (+%d aborted)" % (g("http_server_errors_total"), s["busy"], s["aborted"]))
    need(g("rejected_busy_total") == g("http_server_errors_total"), "busy %d != 5xx %d" % (
        g("rejected_busy_total"), g("http_server_errors_total")))
    need(g("requests_failed_total") == 0, "failed tasks %d" % g("requests_failed_total"))
    need(g("queue_depth") == 0 and g("busy") == 0, "not idle at the end")
    done = g("requests_total") - g("requests_cancelled_total")
    need(s["gen_ok"] <= done <= s["gen_ok"] + s["aborted"],
         "tasks completed %d vs seen %d (+%d aborted)" % (done, s["gen_ok"], s["aborted"]))
    need(g("requests_cancelled_total") <= s["aborted"],
         "cancelled %d > aborted %d" % (g("requests_cancelled_total"), s["aborted"]))
    need(g("generated_tokens_total") >= s["completion_tokens"],
         "generated %d < seen %d" % (g("generated_tokens_total"), s["completion_tokens"]))
    need(g("prompt_tokens_total") >= s["prompt_tokens"], "prompt tokens %d < seen %d" % (
        g("prompt_tokens_total"), s["prompt_tokens"]))
    # Every response seen was counted; aborted requests may or may not have been answered. The
    # final /metrics request itself is not in its own count.
    need(s["responses"] <= g("http_requests_total") <= s["responses"] + s["aborted"],
         "http responses %d vs seen %d (+%d aborted)" % (g("http_requests_total"), s["responses"], s["aborted"]))
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lily", default=os.environ.get("LILY_BIN") or os.path.join(ROOT, "build", "lily"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo"))
    ap.add_argument("--minutes", type=float, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--max-requests", type=int, default=10 ** 7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cache-mb", type=int, default=16,
                    help="prefix-cache budget of the servers: small, so that it fills during warm-up")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--warmup", type=float, default=0.25,
                    help="fraction of the run before RSS is judged")
    ap.add_argument("--no-rss-check", action="store_true",
                    help="report RSS but do not judge it (ASan builds: the quarantine keeps freed memory)")
    a = ap.parse_args()
    global NO_END
    NO_END = end_token_bias(a.lily, a.model)
    dur = a.minutes * 60 + a.seconds or 60
    stats = Stats()
    plain = Server(a.lily, a.model, "plain", a.cache_mb)
    try:
        # The script opens with reasoning, so thinking must be on whatever the model's default
        # (models/demo turns it off: it was trained on answers with an empty think block).
        scripted = Server(a.lily, a.model, "scripted", a.cache_mb, env={"LILY_TEST_OUTPUT": SCRIPT},
                          extra=("--chat-template-kwargs", '{"enable_thinking": true}'))
    except Exception:
        plain.stop()
        raise
    servers = [plain, scripted]
    clients = [Client(i, a.clients, plain, scripted, stats, a.seed) for i in range(a.clients)]
    t0 = time.time()
    deadline = t0 + dur
    stop_rss = threading.Event()

    def sample():
        while not stop_rss.is_set():
            for s in servers:
                kb = s.rss_kb()
                if kb:
                    s.rss.append((time.time(), kb))
            stop_rss.wait(1.0)
    rt = threading.Thread(target=sample, daemon=True)
    rt.start()
    budget = Budget(a.max_requests)
    ths = [threading.Thread(target=c.run, args=(deadline, budget)) for c in clients]
    last_report = t0
    for t in ths:
        t.start()
    while any(t.is_alive() for t in ths):
        time.sleep(1)
        if time.time() - last_report >= 60:
            last_report = time.time()
            print("soak: %4.0fs  %d actions, %d errors, RSS %s" % (
                time.time() - t0, sum(stats.actions.values()), len(stats.errors),
                " ".join("%s=%dkB" % (s.name, s.rss[-1][1]) for s in servers if s.rss)),
                flush=True)
    for t in ths:
        t.join()
    t1 = time.time()
    time.sleep(1.5)  # let aborted requests' cancellations land
    stop_rss.set()
    rt.join()
    problems = ["%s: %s" % e for e in stats.errors]
    summary = {"seconds": round(t1 - t0, 1), "clients": a.clients, "actions": stats.actions,
               "requests": sum(stats.actions.values()), "client_errors": len(stats.errors),
               "multiturn_cached_hits_misses": getattr(stats, "multiturn", [0, 0]), "servers": {}}
    for s in servers:
        alive = s.proc.poll() is None
        if not alive:
            problems.append("%s: server died (rc %s): %s" % (s.name, s.proc.returncode, s.logs()))
            continue
        # Wait for the engine to go idle (aborted tasks finishing their cancellation).
        for _ in range(100):
            m = s.metrics()
            if m["lily_busy"] == 0 and m["lily_queue_depth"] == 0:
                break
            time.sleep(0.1)
        m = s.metrics()
        seen = dict(stats.s(s.name))
        seen["responses"] += s.n_own - 1  # the last /metrics is not in its own count
        problems += metrics_check(s.name, m, seen)
        ok, rss = rss_check(s.rss, t0, t1, a.warmup)
        if not ok and not a.no_rss_check:
            problems.append("%s: RSS grew after warm-up: %s" % (s.name, rss))
        summary["servers"][s.name] = {
            "seen": stats.s(s.name), "rss": rss,
            "metrics": {k[5:]: m[k] for k in m if k.endswith("_total") or k in (
                "lily_prefix_cache_entries", "lily_prefix_cache_bytes")}}
    for s in servers:
        rc = s.stop()
        summary["servers"].setdefault(s.name, {})["exit"] = rc
        if rc != 0:
            problems.append("%s: SIGTERM exit %s" % (s.name, rc))
    mt = summary["multiturn_cached_hits_misses"]
    if mt[0] + mt[1] >= 4 and mt[0] < 0.5 * (mt[0] + mt[1]):
        problems.append("multi-turn prefix reuse hit only %d of %d" % (mt[0], mt[0] + mt[1]))
    summary["problems"] = problems[:50]
    summary["n_problems"] = len(problems)
    print(json.dumps(summary, indent=1, ensure_ascii=False))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1, ensure_ascii=False)
    print("soak: %s: %d requests in %.0f s, %d deliberate bad, %d busy retries, %d problems" % (
        "PASS" if not problems else "FAIL", summary["requests"], t1 - t0,
        sum(stats.s(s.name)["bad"] for s in servers), sum(stats.s(s.name)["busy"] for s in servers),
        len(problems)))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
