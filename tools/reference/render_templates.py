#!/usr/bin/env python3
"""Fill in the expected renderings of the chat-template parity cases.

Reads test/fixtures/templates/cases.json, renders every case with the template it names the way
transformers' apply_chat_template does, and writes each result into the case's "expected" field (and the
renderer into "expected_by"). test/models/qwen3_5/template-parity.test.ts compares Splash's renderer with
these strings.

With transformers installed (the GPU machine) the template is compiled by transformers itself
(transformers.utils.chat_template_utils._compile_jinja_template: ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, loopcontrols, tojson(ensure_ascii=False), raise_exception, strftime_now).
Without it, --allow-jinja2 rebuilds that same environment with plain jinja2 (for a quick local check; the
committed expectations should come from transformers).

    python tools/reference/render_templates.py [--cases PATH] [--allow-jinja2]
"""

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def compile_with_transformers(source):
    import transformers
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compile_jinja_template(source), f"transformers {transformers.__version__} (_compile_jinja_template)"


def compile_with_jinja2(source):
    """The environment transformers builds, rebuilt with jinja2 alone."""
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source), f"jinja2 {jinja2.__version__} (transformers' environment rebuilt)"


def render(template, case):
    # apply_chat_template passes the messages and tools as given, plus the template kwargs.
    kwargs = {"messages": case["messages"], "add_generation_prompt": case.get("add_generation_prompt", True)}
    if case.get("tools"):
        kwargs["tools"] = case["tools"]
    if "enable_thinking" in case:
        kwargs["enable_thinking"] = case["enable_thinking"]
    return template.render(**kwargs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=str(ROOT / "test/fixtures/templates/cases.json"))
    ap.add_argument("--allow-jinja2", action="store_true", help="use plain jinja2 when transformers is missing")
    args = ap.parse_args()

    path = Path(args.cases)
    doc = json.loads(path.read_text(encoding="utf-8"))
    source = (ROOT / doc["template"]).read_text(encoding="utf-8")
    try:
        template, renderer = compile_with_transformers(source)
    except ImportError:
        if not args.allow_jinja2:
            sys.exit("transformers is not installed (pass --allow-jinja2 for a local jinja2 rendering)")
        template, renderer = compile_with_jinja2(source)

    for case in doc["cases"]:
        case["expected"] = render(template, case)
    doc["expected_by"] = renderer
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"{len(doc['cases'])} cases rendered with {renderer} -> {path}")


if __name__ == "__main__":
    main()
