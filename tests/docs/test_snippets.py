#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Every C snippet in README.md and docs/*.md is compiled against the
library and run against a real redis-server (ctest docs_snippets).

Usage: test_snippets.py --cc CC --include DIR --lib LIBDLOCK.so [--cflags=F] SRC_DIR

A ```c block is compiled as it stands when it has a main(); otherwise it is
a fragment, put in the body of main() after <dlock.h> and the standard
headers it is likely to use (its own #include lines are hoisted). An HTML
comment on the line before the block can say how it runs:

  <!-- snippet: with client -->   the fragment continues the "Use" example:
                                  `client` (connected), `err` and `opts`
                                  (DLOCK_LOCK_OPTIONS_INIT) are declared
  <!-- snippet: compile-only: WHY --> compiled, not run (WHY says what it
                                  needs that the test cannot give it)

A snippet passes when it compiles with -Wall -Werror, exits 0 and writes
nothing on stderr (snippets report failures there). "redis://127.0.0.1:6379"
in a snippet is replaced by the test server's URL.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from cli_support import RedisServer  # noqa: E402

BLOCK = re.compile(r"(?:<!-- snippet: (?P<how>[^>]*?) -->\n)?```c\n(?P<code>.*?)```", re.S)
DEFAULT_URL = "redis://127.0.0.1:6379"
HEADERS = ["dlock.h", "inttypes.h", "stdint.h", "stdio.h", "stdlib.h", "string.h", "unistd.h"]


def snippets(src):
    files = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    for path in files:
        with open(path) as f:
            text = f.read()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start("code"))
            yield os.path.relpath(path, src), line, (m.group("how") or "").strip(), m.group("code")


def program(code, how, url):
    code = code.replace(DEFAULT_URL, url)
    if re.search(r"\bmain\s*\(", code):
        return code
    includes = [ln for ln in code.splitlines() if ln.startswith("#include")]
    body = "\n".join(ln for ln in code.splitlines() if not ln.startswith("#include"))
    head = "".join(f"#include <{h}>\n" for h in HEADERS) + "\n".join(includes) + "\n"
    pre = ""
    if how == "with client":
        pre = (f'    const char *snippet_urls[] = {{"{url}"}};\n'
               "    dlock_client *client = NULL;\n"
               "    char err[256] = \"\";\n"
               "    dlock_lock_options opts = DLOCK_LOCK_OPTIONS_INIT;\n"
               "    if (dlock_client_new(&client, snippet_urls, 1, NULL, err, sizeof err) != DLOCK_OK) {\n"
               "        fprintf(stderr, \"snippet set-up: %s\\n\", err);\n"
               "        return 1;\n"
               "    }\n")
    post = "    dlock_client_free(client);\n" if how == "with client" else ""
    return f"{head}\nint main(void)\n{{\n{pre}{{\n{body}\n}}\n{post}    return 0;\n}}\n"


# A snippet on an event loop (<dlock/libuv.h>, <dlock/libevent.h>) builds
# with that library's flags, and with _GNU_SOURCE, as its headers want the
# POSIX types that -std=c11 alone hides.
LOOP_LIBS = {"dlock/libuv.h": "libuv", "dlock/libevent.h": "libevent"}


def loop_flags(code):
    flags = []
    for header, pkg in LOOP_LIBS.items():
        if f"<{header}>" not in code:
            continue
        r = subprocess.run(["pkg-config", "--cflags", "--libs", pkg], capture_output=True, text=True)
        if r.returncode != 0:
            return None
        flags += ["-D_GNU_SOURCE", *r.stdout.split()]
    return flags


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--include", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cflags", default="", help="more flags (a sanitizer the library has)")
    ap.add_argument("src")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dlock-snippets-")
    server = RedisServer(tmp)
    failed = ran = compiled = 0
    try:
        for path, line, how, code in snippets(a.src):
            where = f"{path}:{line}"
            if how and how != "with client" and not how.startswith("compile-only:"):
                print(f"FAIL {where}: unknown snippet directive '{how}'")
                failed += 1
                continue
            c = os.path.join(tmp, f"snippet{compiled}.c")
            exe = c[:-2]
            with open(c, "w") as f:
                f.write(program(code, how, server.url))
            libdir = os.path.dirname(os.path.abspath(a.lib))
            loops = loop_flags(code)
            if loops is None:
                print(f"skip {where}: its loop library is not installed")
                continue
            cc = subprocess.run([a.cc, *a.cflags.split(), "-std=c11", "-Wall", "-Werror",
                                 "-Wno-unused-variable",
                                 "-Wno-unused-but-set-variable", f"-I{a.include}", c, "-o", exe,
                                 f"-L{libdir}", "-ldlock", f"-Wl,-rpath,{libdir}", *loops],
                                capture_output=True, text=True)
            compiled += 1
            if cc.returncode != 0:
                print(f"FAIL {where}: does not compile\n{cc.stderr}")
                failed += 1
                continue
            if how.startswith("compile-only:"):
                print(f"ok   {where}: compiles ({how})")
                continue
            r = subprocess.run([exe], capture_output=True, text=True, timeout=60)
            ran += 1
            if r.returncode != 0 or r.stderr:
                print(f"FAIL {where}: exit {r.returncode}, stderr: {r.stderr.strip()!r}")
                failed += 1
            else:
                print(f"ok   {where}: compiles and runs")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{compiled} snippets compiled, {ran} run, {failed} failed")
    if compiled == 0:
        print("FAIL: no ```c snippet found")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
