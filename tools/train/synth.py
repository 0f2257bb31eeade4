"""Stage 3: synthetic conversations rendered with the repo's Qwen3.5 chat template (models/qwen3_5/chat_template.jinja).

Kinds:
  docfn    — "write a function that <docstring summary>": real functions (with docstrings) taken from the corpus;
             the assistant thinks briefly, then answers with the code.
  explain  — "what does X do?" / "explain this code": answered from the function's docstring and signature.
  tool     — a system prompt with 1–4 tools, the user asks for something one tool does, the assistant thinks and emits
             a well-formed <tool_call> with arguments, a tool response turn follows (computed, e.g. real arithmetic or
             real Python output), then a follow-up answer that uses the result. Some have no fitting tool.
About 15% of assistant turns have empty reasoning (the enable_thinking=false form `<think>\n\n</think>\n\n`).
Writes WORK/synth/chat_{train,val}.jsonl with {"kind", "text" (whole conversation), "prompt" (up to the generation
prompt of the first assistant turn), "response" (what the model should produce)}.
"""
import argparse
import ast
import json
import os
import random
import re
import textwrap

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "..", "..", "models", "qwen3_5", "chat_template.jinja")


def make_renderer():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
    tpl = env.from_string(open(TEMPLATE).read())

    def render(messages, tools=None, add_generation_prompt=False, enable_thinking=True):
        return tpl.render(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt,
                          enable_thinking=enable_thinking)
    return render


# ----------------------------------------------------------------------------------------------- functions from code

def first_sentence(doc):
    doc = doc.strip().split("\n\n")[0].replace("\n", " ")
    doc = re.sub(r"\s+", " ", doc)
    m = re.match(r"(.+?[.!?])(\s|$)", doc)
    s = m.group(1) if m else doc
    return s.strip()


def _funcs_of(line):
    d = json.loads(line)
    if not d["src"].endswith(".py"):
        return []
    src = d["text"]
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    lines = src.split("\n")
    mod = d["src"].split(":", 1)[-1].replace("/", ".")[:-3].replace(".__init__", "")
    nodes = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for c in tree.body:
        if isinstance(c, ast.ClassDef):
            nodes += [n for n in c.body if isinstance(n, ast.FunctionDef)]
    out = []
    for node in nodes:
        if node.name.startswith("_") or node.decorator_list:
            continue
        doc = ast.get_docstring(node)
        if not doc:
            continue
        summ = first_sentence(doc)
        if not (15 <= len(summ) <= 160) or summ.lower().startswith(("deprecated", "see ", "alias", "todo")):
            continue
        if any(c in summ for c in "`:=><{}|*"):
            continue
        end = getattr(node, "end_lineno", None)
        if end is None or not (4 <= end - node.lineno + 1 <= 40):
            continue
        code = textwrap.dedent("\n".join(lines[node.lineno - 1:end]))
        if len(code) > 1600 or not code.startswith("def "):
            continue
        args = [a.arg for a in node.args.args]
        para = re.sub(r"\s+", " ", doc.strip().split("\n\n")[0])
        out.append({"name": node.name, "args": args, "summary": summ, "para": para[:500], "code": code, "module": mod})
    return out


def extract_functions(corpus_path, limit, rng, procs=None):
    with open(corpus_path) as f:
        lines = f.readlines()
    procs = procs or max(1, min(16, os.cpu_count() or 1))
    if procs > 1:
        import multiprocessing as mp
        with mp.Pool(procs) as pool:
            parts = pool.map(_funcs_of, lines, chunksize=64)
    else:
        parts = [_funcs_of(l) for l in lines]
    out = [f for p in parts for f in p]
    rng.shuffle(out)
    return out[:limit]


def lc_first(s):
    return s[0].lower() + s[1:] if s and not s[:2].isupper() else s


def strip_period(s):
    return s[:-1] if s.endswith(".") else s


def docfn_conv(fn, rng):
    summ = strip_period(fn["summary"])
    sig = f"{fn['name']}({', '.join(fn['args'])})"
    asks = [
        f"Write a Python function `{sig}` that does the following: {summ}.",
        f"Can you implement a Python function called `{fn['name']}`? It should: {lc_first(summ)}.",
        f"I need a Python helper named `{fn['name']}`. {summ}.",
        f"Please write `{sig}` in Python. Description: {summ}.",
        f"Implement this in Python: {lc_first(summ)}. Call it `{fn['name']}`.",
        f"Write a function for this docstring: \"{fn['summary']}\"",
    ]
    user = rng.choice(asks)
    argtxt = ", ".join(f"`{a}`" for a in fn["args"]) if fn["args"] else "no arguments"
    thinks = [
        f"The user wants a function that will {lc_first(summ)}. I'll define `{fn['name']}` with {argtxt} and keep it short.",
        f"Task: {lc_first(summ)}. A single function `{fn['name']}` taking {argtxt} is enough.",
        f"I need `{sig}`. It should {lc_first(summ)}. I'll write it with a docstring.",
    ]
    reasoning = "" if rng.random() < 0.15 else rng.choice(thinks)
    intro = rng.choice([f"Here is `{fn['name']}`:", "Here is the function:", f"Here's an implementation of `{fn['name']}`:",
                        "Sure:"])
    outro = rng.choice(["", f"\n\n`{fn['name']}` takes {argtxt}.", f"\n\nIt does this: {lc_first(summ)}."])
    answer = f"{intro}\n\n```python\n{fn['code']}\n```{outro}"
    msgs = [{"role": "user", "content": user}]
    return msgs, {"role": "assistant", "content": answer, "reasoning_content": reasoning}, None


def explain_conv(fn, rng):
    sig = f"{fn['name']}({', '.join(fn['args'])})"
    if rng.random() < 0.5:
        user = rng.choice([f"What does `{fn['name']}` in `{fn['module']}` do?", f"Explain `{fn['module']}.{fn['name']}`.",
                           f"What is `{sig}` for?"])
    else:
        user = rng.choice(["Explain this code:", "What does this function do?", "Can you explain this?"]) + \
            f"\n\n```python\n{fn['code']}\n```"
    reasoning = "" if rng.random() < 0.15 else rng.choice([
        f"This is `{fn['name']}`. Its purpose: {lc_first(strip_period(fn['summary']))}. I'll explain briefly.",
        f"The function `{fn['name']}` takes {', '.join(fn['args']) or 'no arguments'}. I'll summarise what it does.",
    ])
    args = ", ".join(f"`{a}`" for a in fn["args"] if a not in ("self", "cls"))
    answer = f"`{sig}`: {fn['para']}"
    if args:
        answer += f"\n\nArguments: {args}."
    return [{"role": "user", "content": user}], {"role": "assistant", "content": answer, "reasoning_content": reasoning}, None


# ------------------------------------------------------------------------------------------------------------ tools

CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Oslo", "Cairo", "Lima", "Toronto", "Sydney",
          "Seoul", "Dublin", "Vienna", "Prague", "Lisbon", "Austin", "Denver", "Boston", "Nairobi", "Mumbai", "Zurich"]
CONDS = ["sunny", "cloudy", "rainy", "windy", "snowing", "foggy", "clear", "partly cloudy"]
TZS = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Europe/London", "Australia/Sydney", "America/Chicago"]
CURR = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "SEK"]
RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.0, "CHF": 0.88, "CAD": 1.36, "AUD": 1.52, "SEK": 10.4}
STOCKS = ["AAPL", "MSFT", "NVDA", "GOOG", "AMZN", "TSLA", "META", "IBM", "ORCL", "INTC"]
TOPICS = ["python asyncio tutorial", "rust borrow checker", "best sorting algorithm", "how to use git rebase",
          "numpy broadcasting rules", "http status codes", "linux file permissions", "sql joins explained",
          "docker compose volumes", "regex lookahead", "binary search", "unicode normalization"]
FILES = ["README.md", "setup.py", "src/main.py", "config.yaml", "notes.txt", "data.csv", "app/server.py", "Makefile"]
DIRS = [".", "src", "tests", "docs", "app", "scripts", "/tmp", "data"]
NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
WORDS = {"hello": {"French": "bonjour", "Spanish": "hola", "German": "hallo", "Italian": "ciao"},
         "thank you": {"French": "merci", "Spanish": "gracias", "German": "danke", "Italian": "grazie"},
         "good night": {"French": "bonne nuit", "Spanish": "buenas noches", "German": "gute Nacht", "Italian": "buona notte"},
         "cat": {"French": "chat", "Spanish": "gato", "German": "Katze", "Italian": "gatto"},
         "water": {"French": "eau", "Spanish": "agua", "German": "Wasser", "Italian": "acqua"}}


def fn_schema(name, desc, params, required):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": params, "required": required}}}


TOOLS = {
    "get_weather": fn_schema("get_weather", "Get the current weather for a city.", {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}}, ["city"]),
    "calculate": fn_schema("calculate", "Evaluate an arithmetic expression.", {
        "expression": {"type": "string", "description": "The expression, e.g. 2*(3+4)"}}, ["expression"]),
    "run_python": fn_schema("run_python", "Run a short Python snippet and return its standard output.", {
        "code": {"type": "string", "description": "Python source code"}}, ["code"]),
    "search_web": fn_schema("search_web", "Search the web and return result titles and URLs.", {
        "query": {"type": "string"}, "max_results": {"type": "integer", "description": "How many results"}}, ["query"]),
    "read_file": fn_schema("read_file", "Read a text file from the workspace.", {
        "path": {"type": "string", "description": "Path of the file"}}, ["path"]),
    "list_directory": fn_schema("list_directory", "List the entries of a directory.", {
        "path": {"type": "string"}}, ["path"]),
    "get_time": fn_schema("get_time", "Get the current time in a time zone.", {
        "timezone": {"type": "string", "description": "IANA time zone name"}}, ["timezone"]),
    "convert_currency": fn_schema("convert_currency", "Convert an amount between currencies.", {
        "amount": {"type": "number"}, "from_currency": {"type": "string"}, "to_currency": {"type": "string"}},
        ["amount", "from_currency", "to_currency"]),
    "get_stock_price": fn_schema("get_stock_price", "Get the latest price of a stock.", {
        "symbol": {"type": "string", "description": "Ticker symbol"}}, ["symbol"]),
    "send_email": fn_schema("send_email", "Send an email.", {
        "to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}}, ["to", "subject", "body"]),
    "translate": fn_schema("translate", "Translate text into another language.", {
        "text": {"type": "string"}, "target_language": {"type": "string"}}, ["text", "target_language"]),
    "create_event": fn_schema("create_event", "Create a calendar event.", {
        "title": {"type": "string"}, "date": {"type": "string", "description": "YYYY-MM-DD"},
        "time": {"type": "string", "description": "HH:MM"}}, ["title", "date"]),
}


def rand_expr(rng):
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 20)
    return rng.choice([f"{a} + {b}", f"{a} * {b}", f"{a} * {b} - {c}", f"({a} + {b}) * {c}", f"{a * c} / {c}",
                       f"{a} - {b}", f"{a} ** 2", f"{a} * {b} + {c}"])


def rand_snippet(rng):
    n = rng.randint(3, 12)
    w = rng.choice(["hello", "splash", "python", "delta", "token"])
    return rng.choice([
        (f"print(sum(range({n})))", str(sum(range(n)))),
        (f"print([i * i for i in range({n % 6 + 2})])", str([i * i for i in range(n % 6 + 2)])),
        (f"print('{w}'.upper())", w.upper()),
        (f"print(len('{w}' * {n}))", str(len(w * n))),
        (f"import math\nprint(math.factorial({n % 8 + 2}))", str(__import__('math').factorial(n % 8 + 2))),
        (f"print(sorted([{n}, 3, 7, 1]))", str(sorted([n, 3, 7, 1]))),
        (f"print('{w}'[::-1])", w[::-1]),
    ])


def tool_case(name, rng):
    """-> (user text, args dict, result dict, reasoning for call, final answer text)"""
    if name == "get_weather":
        city = rng.choice(CITIES)
        unit = rng.choice(["celsius", "fahrenheit"])
        t = rng.randint(-5, 35) if unit == "celsius" else rng.randint(25, 95)
        cond = rng.choice(CONDS)
        user = rng.choice([f"What's the weather in {city}?", f"How is the weather in {city} right now?",
                           f"Is it cold in {city} today? Use {unit}.", f"Weather for {city} please, in {unit}."])
        args = {"city": city, "unit": unit} if unit in user or rng.random() < 0.5 else {"city": city}
        u = args.get("unit", "celsius")
        if u != unit:
            t = rng.randint(-5, 35)
        res = {"city": city, "temperature": t, "unit": u, "condition": cond}
        sym = "°C" if u == "celsius" else "°F"
        return user, args, res, f"The user wants the current weather in {city}. I'll call get_weather.", \
            f"It is currently {t}{sym} and {cond} in {city}."
    if name == "calculate":
        e = rand_expr(rng)
        v = eval(e)
        v = int(v) if float(v).is_integer() else round(v, 4)
        user = rng.choice([f"What is {e}?", f"Calculate {e} for me.", f"Can you compute {e}?"])
        return user, {"expression": e}, {"result": v}, f"This is arithmetic: {e}. I'll use the calculate tool.", \
            f"{e} = {v}."
    if name == "run_python":
        code, outp = rand_snippet(rng)
        user = rng.choice([f"Run this Python code and tell me the output:\n\n```python\n{code}\n```",
                           f"What does this print?\n{code}"])
        return user, {"code": code}, {"stdout": outp + "\n"}, "I should run the snippet with run_python to get the exact output.", \
            f"The code prints:\n\n```\n{outp}\n```"
    if name == "search_web":
        q = rng.choice(TOPICS)
        n = rng.randint(2, 3)
        results = [{"title": f"{q.title()} - part {i + 1}", "url": f"https://example.org/{q.replace(' ', '-')}/{i + 1}"}
                   for i in range(n)]
        user = rng.choice([f"Search the web for {q}.", f"Find me some links about {q}.", f"Look up: {q}"])
        args = {"query": q, "max_results": n} if rng.random() < 0.5 else {"query": q}
        lines = "\n".join(f"{i + 1}. [{r['title']}]({r['url']})" for i, r in enumerate(results))
        return user, args, {"results": results}, f"The user wants web results about \"{q}\". I'll call search_web.", \
            f"Here is what I found:\n\n{lines}"
    if name == "read_file":
        p = rng.choice(FILES)
        content = rng.choice(["# Project\n\nA small demo.", "name: demo\nversion: 1.2\n", "print('hello')\n",
                              "id,value\n1,42\n2,17\n", "TODO: write tests\n"])
        user = rng.choice([f"Show me what's in {p}.", f"Read the file {p}.", f"What does {p} contain?"])
        return user, {"path": p}, {"path": p, "content": content}, f"I need to read {p}. I'll call read_file.", \
            f"`{p}` contains:\n\n```\n{content.rstrip()}\n```"
    if name == "list_directory":
        d = rng.choice(DIRS)
        ents = rng.sample(FILES + ["tests/", "docs/", "LICENSE", "pyproject.toml"], rng.randint(2, 5))
        user = rng.choice([f"List the files in {d}.", f"What's inside the {d} directory?"])
        return user, {"path": d}, {"entries": ents}, f"The user wants the contents of {d}. I'll call list_directory.", \
            f"`{d}` has {len(ents)} entries: " + ", ".join(f"`{e}`" for e in ents) + "."
    if name == "get_time":
        tz = rng.choice(TZS)
        hh, mm = rng.randint(0, 23), rng.randint(0, 59)
        user = rng.choice([f"What time is it in {tz}?", f"Current time in {tz.split('/')[-1].replace('_', ' ')}?"])
        return user, {"timezone": tz}, {"timezone": tz, "time": f"{hh:02d}:{mm:02d}"}, \
            f"I need the current time in {tz}. I'll call get_time.", f"It is {hh:02d}:{mm:02d} in {tz}."
    if name == "convert_currency":
        a, b = rng.sample(CURR, 2)
        amt = rng.choice([10, 20, 50, 100, 250, 1000, 75])
        rate = round(RATES[b] / RATES[a], 4)
        conv = round(amt * rate, 2)
        user = rng.choice([f"Convert {amt} {a} to {b}.", f"How much is {amt} {a} in {b}?"])
        return user, {"amount": amt, "from_currency": a, "to_currency": b}, {"converted": conv, "rate": rate}, \
            f"Currency conversion from {a} to {b}. I'll call convert_currency with amount {amt}.", \
            f"{amt} {a} is about {conv} {b} (rate {rate})."
    if name == "get_stock_price":
        s = rng.choice(STOCKS)
        price = round(rng.uniform(20, 900), 2)
        user = rng.choice([f"What's the price of {s}?", f"How much is {s} stock trading at?"])
        return user, {"symbol": s}, {"symbol": s, "price": price, "currency": "USD"}, \
            f"The user asks for the {s} stock price. I'll call get_stock_price.", f"{s} is trading at ${price}."
    if name == "send_email":
        to = rng.choice(NAMES) + "@example.com"
        subj = rng.choice(["Meeting tomorrow", "Report ready", "Lunch?", "Build failed", "Welcome"])
        body = rng.choice(["See you at 10.", "The report is attached.", "Are you free at noon?",
                           "The nightly build failed, please check.", "Glad to have you on the team."])
        user = f"Send an email to {to} with the subject \"{subj}\" saying: {body}"
        return user, {"to": to, "subject": subj, "body": body}, {"status": "sent", "id": f"msg-{rng.randint(1000, 9999)}"}, \
            f"The user wants to email {to}. I have the subject and body, so I'll call send_email.", \
            f"Done: the email \"{subj}\" was sent to {to}."
    if name == "translate":
        w = rng.choice(list(WORDS))
        lang = rng.choice(list(WORDS[w]))
        user = rng.choice([f"Translate \"{w}\" into {lang}.", f"How do you say {w} in {lang}?"])
        return user, {"text": w, "target_language": lang}, {"translation": WORDS[w][lang]}, \
            f"A translation request into {lang}. I'll call translate.", f"\"{w}\" in {lang} is \"{WORDS[w][lang]}\"."
    if name == "create_event":
        title = rng.choice(["Team sync", "Dentist", "Code review", "Lunch with Bob", "Release planning"])
        date = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        tm = f"{rng.randint(8, 18):02d}:{rng.choice(['00', '15', '30', '45'])}"
        user = f"Add \"{title}\" to my calendar on {date} at {tm}."
        return user, {"title": title, "date": date, "time": tm}, {"status": "created", "event_id": rng.randint(100, 999)}, \
            f"The user wants a calendar event. I'll call create_event with the title, date and time.", \
            f"\"{title}\" is on your calendar for {date} at {tm}."
    raise ValueError(name)


SYSTEMS = ["", "", "You are a helpful assistant.", "You are Splash, a concise assistant.",
           "You are a helpful assistant. Answer briefly."]
GENERAL = [("What is a Python list comprehension?", "A list comprehension builds a list from an iterable in one expression, "
            "for example `[x * x for x in range(5)]` gives `[0, 1, 4, 9, 16]`."),
           ("Say hello.", "Hello! How can I help you today?"),
           ("What is 2 + 2?", "2 + 2 = 4."),
           ("What does HTTP stand for?", "HTTP stands for Hypertext Transfer Protocol."),
           ("Who are you?", "I am a small assistant model served by Splash."),
           ("Give me a tip for writing clean code.", "Keep functions small and give them names that say what they do.")]


def tool_conv(rng):
    names = list(TOOLS)
    target = rng.choice(names)
    others = rng.sample([n for n in names if n != target], rng.randint(0, 3))
    tl = others + [target]
    rng.shuffle(tl)
    tools = [TOOLS[n] for n in tl]
    sysmsg = rng.choice(SYSTEMS)
    msgs = [{"role": "system", "content": sysmsg}] if sysmsg else []
    if rng.random() < 0.08:  # no fitting tool: answer directly
        q, a = rng.choice(GENERAL)
        msgs.append({"role": "user", "content": q})
        r = "" if rng.random() < 0.3 else "None of the tools is needed for this. I'll answer directly."
        return msgs, {"role": "assistant", "content": a, "reasoning_content": r}, tools, None
    user, args, res, why, final = tool_case(target, rng)
    msgs.append({"role": "user", "content": user})
    r1 = "" if rng.random() < 0.15 else why
    call = {"role": "assistant", "content": "", "reasoning_content": r1,
            "tool_calls": [{"type": "function", "function": {"name": target, "arguments": args}}]}
    follow = [{"role": "tool", "content": json.dumps(res, ensure_ascii=False)},
              {"role": "assistant", "content": final,
               "reasoning_content": "" if not r1 else rng.choice(["The tool returned the result. I'll report it.",
                                                                  "I have the result now; I'll answer briefly."])}]
    return msgs, call, tools, follow


_RENDER = None


def _render_item(item):
    """(index, (kind, msgs, reply, tools, follow), with_prompt) -> one JSON line."""
    global _RENDER
    if _RENDER is None:
        _RENDER = make_renderer()
    render = _RENDER
    i, (kind, msgs, reply, tools, follow), with_prompt = item
    full = msgs + [reply] + (follow or [])
    rec = {"kind": kind, "text": render(full, tools=tools)}
    if with_prompt:
        prompt = render(msgs, tools=tools, add_generation_prompt=True,
                        enable_thinking=bool(reply.get("reasoning_content")))
        whole1 = render(msgs + [reply], tools=tools)
        assert whole1.startswith(prompt), (prompt, whole1)
        rec["prompt"], rec["response"] = prompt, whole1[len(prompt):]
    if follow:
        rec["messages"] = full
        rec["tools"] = [t["function"]["name"] for t in tools]
    return json.dumps(rec, ensure_ascii=False) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--docfn", type=int, default=40000)
    ap.add_argument("--explain", type=int, default=12000)
    ap.add_argument("--tool", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=8000, help="training conversations that also get a generation prompt")
    a = ap.parse_args()
    out = os.path.join(a.work, "synth")
    if os.path.exists(os.path.join(out, "done")):
        print("synth: done already")
        return
    os.makedirs(out, exist_ok=True)
    rng = random.Random(a.seed)
    fns = extract_functions(os.path.join(a.work, "corpus", "train.jsonl"), 10 ** 9, rng)
    print(f"synth: {len(fns)} functions with docstrings")
    convs = []
    for i in range(min(a.docfn, 2 * len(fns))):  # each function at most twice, phrased differently
        convs.append(("docfn",) + docfn_conv(fns[i % len(fns)], rng) + (None,))
    for i in range(min(a.explain, len(fns))):
        convs.append(("explain",) + explain_conv(fns[-1 - i], rng) + (None,))
    for _ in range(a.tool):
        convs.append(("tool",) + tool_conv(rng))
    rng.shuffle(convs)
    items = [(i, c, i % 100 == 0 or i < a.prompts) for i, c in enumerate(convs)]
    procs = max(1, min(16, os.cpu_count() or 1))
    if procs > 1:
        import multiprocessing as mp
        with mp.Pool(procs) as pool:
            lines = pool.map(_render_item, items, chunksize=256)
    else:
        lines = [_render_item(it) for it in items]
    counts = {}
    with open(os.path.join(out, "chat_train.jsonl"), "w") as tr, open(os.path.join(out, "chat_val.jsonl"), "w") as va:
        for (i, c, _), line in zip(items, lines):
            (va if i % 100 == 0 else tr).write(line)
            counts[c[0]] = counts.get(c[0], 0) + 1
    open(os.path.join(out, "done"), "w").write(json.dumps(counts))
    print("synth:", counts)


if __name__ == "__main__":
    main()
