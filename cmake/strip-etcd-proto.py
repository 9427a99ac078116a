#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Copy etcd's own .proto files (Debian's golang-etcd-server-dev, etcd 3.4)
into OUT_DIR in the layout their imports name, without the gogoproto and
google.api options, which only the Go and gateway generators read:
protoc-c then makes C for exactly etcd's messages and field numbers.

Usage: strip-etcd-proto.py OUT_DIR [ETCD_SRC]
"""
import os
import re
import sys

FILES = ("etcdserver/etcdserverpb/rpc.proto", "mvcc/mvccpb/kv.proto", "auth/authpb/auth.proto")


def strip(text):
    text = re.sub(r'^import "(gogoproto|google)/[^"]*";\n', "", text, flags=re.M)
    text = re.sub(r"^option \(gogoproto\.[^;]*;\n", "", text, flags=re.M)
    # option (google.api.http) = { ... };  (an RPC's gateway route, whose
    # braces nest)
    while (at := text.find("option (google.api.http)")) >= 0:
        i, depth = text.index("{", at), 0
        while True:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        text = text[:at] + text[text.index(";", i) + 1:]
    # field options: [(gogoproto.nullable) = false, ...]
    text = re.sub(r"\s*\[\(gogoproto\.[^\]]*\]", "", text)
    return text


def main():
    out = sys.argv[1]
    src = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/gocode/src/go.etcd.io/etcd"
    for f in FILES:
        dst = os.path.join(out, "etcd", f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(os.path.join(src, f)) as i, open(dst, "w") as o:
            o.write(strip(i.read()))


if __name__ == "__main__":
    main()
