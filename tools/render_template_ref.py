#!/usr/bin/env python3
"""render_template_ref.py: the reference for Lily's chat template renderer (src/template.c).

Renders an OpenAI chat-completions request body with a Jinja chat template the way HF
transformers' apply_chat_template does (transformers/utils/chat_template_utils.py, 5.x), using
jinja2 only:
  - ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[jinja2.ext.loopcontrols]);
  - a `tojson` filter = json.dumps(x, ensure_ascii=False, indent=None, separators=None
    (that is ", " and ": "), sort_keys=False);
  - a `raise_exception(msg)` global that raises TemplateError;
  - template variables: messages, tools, add_generation_prompt, and every key of
    chat_template_kwargs.

Request -> template variables (what an OpenAI server does before calling the template; Lily does
exactly the same in tmpl_render):
  - reasoning aliases, as transformers 5.x does: a message's reasoning_content becomes the first
    non-null of reasoning_content, thinking, reasoning;
  - a tool call's `arguments` given as a JSON string (the OpenAI wire form) is parsed to an object
    (the template iterates it with |items); a string that is not a JSON object is an error.

Usage:
  render_template_ref.py --template FILE --request FILE [--no-gen]
prints the rendered text to stdout (no newline added); an error prints one line to stderr and
exits 1. Importable: render(template_text, request_dict, add_generation_prompt=True).
  render_template_ref.py --write-cases
rewrites the golden fixtures tests/fixtures/templates/cases/ from tests/py/template_cases.py:
NAME.json (the request) with NAME.qwen3.5.txt and NAME.qwen3.6.txt (the rendering with the
generation prompt), and err_NAME.json for requests that must be refused.
"""
import argparse
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


class RenderError(Exception):
    pass


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    return env


def template_messages(messages):
    """The request's messages as the template sees them (see the module comment)."""
    if not isinstance(messages, list):
        raise RenderError("messages must be an array")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise RenderError(f"messages[{i}] is not an object")
        m = dict(m)
        reasoning = next((m[k] for k in ("reasoning_content", "thinking", "reasoning")
                          if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        calls = m.get("tool_calls")
        if isinstance(calls, list):
            new_calls = []
            for c in calls:
                if isinstance(c, dict):
                    c = dict(c)
                    holder = c
                    if isinstance(c.get("function"), dict):
                        c["function"] = holder = dict(c["function"])
                    args = holder.get("arguments")
                    if isinstance(args, str):
                        try:
                            parsed = json.loads(args)
                        except ValueError:
                            raise RenderError("tool call arguments are not valid JSON")
                        if not isinstance(parsed, dict):
                            raise RenderError("tool call arguments are not a JSON object")
                        holder["arguments"] = parsed
                new_calls.append(c)
            m["tool_calls"] = new_calls
        out.append(m)
    return out


def render(template_text, request, add_generation_prompt=True):
    if not isinstance(request, dict):
        raise RenderError("request is not a JSON object")
    kwargs = request.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise RenderError("chat_template_kwargs must be an object")
    kwargs = {k: v for k, v in kwargs.items()
              if k not in ("messages", "tools", "add_generation_prompt")}
    messages = template_messages(request.get("messages"))
    tools = request.get("tools")
    if tools is not None and not isinstance(tools, list):  # HF refuses these too
        raise RenderError("tools must be an array")
    tmpl = make_env().from_string(template_text)
    try:
        return tmpl.render(messages=messages, tools=tools,
                           add_generation_prompt=add_generation_prompt, **kwargs)
    except jinja2.exceptions.TemplateError as e:
        raise RenderError(str(e))
    except (TypeError, ValueError, AttributeError) as e:
        raise RenderError(f"{type(e).__name__}: {e}")


def write_cases():
    import os
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sys.path.insert(0, os.path.join(root, "tests", "py"))
    from template_cases import CASES, ERROR_CASES
    tdir = os.path.join(root, "tests", "fixtures", "templates")
    out = os.path.join(tdir, "cases")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    for name, req in CASES.items():
        with open(os.path.join(out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(req, f, ensure_ascii=False, indent=1)
        for variant in ("qwen3.5", "qwen3.6"):
            with open(os.path.join(tdir, variant + ".jinja"), encoding="utf-8") as f:
                text = render(f.read(), req)
            with open(os.path.join(out, f"{name}.{variant}.txt"), "wb") as f:
                f.write(text.encode("utf-8"))
    for variant in ("qwen3.5", "qwen3.6"):  # the template inside tokenizer_config.json
        with open(os.path.join(tdir, variant + ".jinja"), encoding="utf-8") as f:
            cfg = {"tokenizer_class": "Qwen2Tokenizer", "chat_template": f.read()}
        os.makedirs(os.path.join(tdir, "config-" + variant), exist_ok=True)
        with open(os.path.join(tdir, "config-" + variant, "tokenizer_config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
    for name, req in ERROR_CASES.items():
        with open(os.path.join(out, "err_" + name + ".json"), "w", encoding="utf-8") as f:
            json.dump(req, f, ensure_ascii=False, indent=1)
    print(f"wrote {len(CASES)} cases and {len(ERROR_CASES)} error cases to {out}")


def main():
    if sys.argv[1:] == ["--write-cases"]:
        return write_cases()
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", required=True)
    ap.add_argument("--request", required=True)
    ap.add_argument("--no-gen", action="store_true")
    a = ap.parse_args()
    with open(a.template, encoding="utf-8") as f:
        text = f.read()
    try:
        with open(a.request, encoding="utf-8") as f:
            req = json.load(f)
        out = render(text, req, not a.no_gen)
    except (RenderError, ValueError) as e:
        print(f"render_template_ref: {e}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(out.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
