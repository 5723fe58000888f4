#!/usr/bin/env python3
"""Renders every chat template in shared/jinja/testdata/templates with every
conversation in conversations.json using Debian's python3-jinja2, set up as
transformers' apply_chat_template sets it up, and writes rendered.json: the
expected output (or error) the C++ golden test compares against.

  apt-get install python3-jinja2 && scripts/render_chat_templates.py

strftime_now is pinned to 2026-01-01 UTC so that dated templates are
reproducible; the C++ test pins the same instant.
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shared",
                    "jinja", "testdata")
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


# transformers' tojson: json.dumps keeping non-ASCII text.
def tojson(x, ensure_ascii=False, indent=None, separators=None,
           sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def main():
    templates = json.load(open(os.path.join(HERE, "templates.json")))
    cases = json.load(open(os.path.join(HERE, "conversations.json")))
    env = make_env()
    results = []
    for name in sorted(templates):
        meta = templates[name]
        source = open(os.path.join(HERE, "templates", name + ".jinja")).read()
        compiled = env.from_string(source)
        for case in cases:
            context = dict(messages=case["messages"], tools=case.get("tools"),
                           documents=None,
                           add_generation_prompt=case["add_generation_prompt"],
                           bos_token=meta["bos_token"],
                           eos_token=meta["eos_token"])
            context.update(case.get("kwargs", {}))
            record = {"template": name, "case": case["name"]}
            try:
                record["output"] = compiled.render(**context)
            except Raised as e:
                record["error"] = str(e)
                record["raised"] = True
            except Exception as e:  # the template fails on this input
                record["error"] = "%s: %s" % (type(e).__name__, e)
                record["raised"] = False
            results.append(record)
    with open(os.path.join(HERE, "rendered.json"), "w") as f:
        json.dump({"jinja2_version": jinja2.__version__, "results": results},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")
    ok = sum("output" in r for r in results)
    print("%d renders (%d outputs, %d errors) of %d templates x %d "
          "conversations" % (len(results), ok, len(results) - ok,
                             len(templates), len(cases)), file=sys.stderr)


if __name__ == "__main__":
    main()
