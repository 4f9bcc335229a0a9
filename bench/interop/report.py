#!/usr/bin/env python3
"""Per-specification table of an interop run (bench/interop.sh).

Reads OUT/<server>/results.jsonl (one line per test, written by
InteropJsonResultProcessor) for each server named, writes OUT/summary.json
and OUT/summary.md, and prints the table.

    report.py --out DIR [--jar JAR] [--suite-version V] [--timeout MS] SERVER...
"""
import argparse
import datetime
import json
import lzma
import os
import re
import subprocess
import sys

RESULTS = ("passed", "failed", "impossible")


def norm(spec):
    return re.sub(r"[\s-]", "", spec).upper()


def spec_key(spec):
    m = re.match(r"(RFC|XEP)(\d+)", norm(spec))
    if not m:
        return (2, 0, spec)
    return (0 if m.group(1) == "RFC" else 1, int(m.group(2)), spec)


def pretty(spec):
    m = re.match(r"(RFC|XEP)(\d+)$", norm(spec))
    if not m:
        return spec
    return "RFC %s" % m.group(2) if m.group(1) == "RFC" else "XEP-%04d" % int(m.group(2))


def titles_from_jar(jar):
    titles = {}
    if not jar:
        return titles
    try:
        text = subprocess.run(["unzip", "-p", jar, "specifications.properties"],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return titles
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            titles[norm(k)] = v.strip()
    return titles


def smack_version(jar):
    try:
        return subprocess.run(["unzip", "-p", jar, "org.jivesoftware.smack/version"],
                              capture_output=True, text=True, check=True).stdout.split()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return None


def one_line(msg, limit=220):
    if not msg:
        return "(no message)"
    msg = " ".join(msg.split())
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def load(out, server):
    tests = []
    path = os.path.join(out, server, "results.jsonl")
    opener = open
    if not os.path.exists(path) and os.path.exists(path + ".xz"):
        path, opener = path + ".xz", lzma.open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                tests.append(json.loads(line))
    version = None
    vf = os.path.join(out, server, "server-version.txt")
    if os.path.exists(vf):
        version = open(vf, encoding="utf-8").read().strip()
    specs = {}
    for t in tests:
        c = specs.setdefault(t["spec"], {r: 0 for r in RESULTS})
        c[t["result"]] += 1
    totals = {r: sum(c[r] for c in specs.values()) for r in RESULTS}
    totals["total"] = len(tests)
    failures = sorted(
        ({"spec": t["spec"], "test": t["test"], "message": one_line(t["message"])}
         for t in tests if t["result"] == "failed"),
        key=lambda f: (spec_key(f["spec"]), f["test"]))
    impossible = {}
    for t in tests:
        if t["result"] == "impossible":
            k = (t["spec"], one_line(t["message"], 160))
            impossible[k] = impossible.get(k, 0) + 1
    return {
        "version": version,
        "totals": totals,
        "specs": specs,
        "failures": failures,
        "impossible_reasons": [
            {"spec": s, "reason": r, "tests": n}
            for (s, r), n in sorted(impossible.items(), key=lambda x: (spec_key(x[0][0]), -x[1]))
        ],
    }


def cell(c):
    return "%d / %d / %d" % (c["passed"], c["failed"], c["impossible"]) if c else "–"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--jar")
    ap.add_argument("--suite-version")
    ap.add_argument("--timeout")
    ap.add_argument("servers", nargs="+")
    a = ap.parse_args()

    titles = titles_from_jar(a.jar)
    data = {s: load(a.out, s) for s in a.servers}
    specs = sorted({sp for d in data.values() for sp in d["specs"]}, key=spec_key)
    summary = {
        "date": datetime.date.today().isoformat(),
        "suite": {
            "name": "XMPP Interop Testing: smack-sint-server-extensions",
            "version": a.suite_version,
            "jar": os.path.basename(a.jar) if a.jar else None,
            "smack": smack_version(a.jar) if a.jar else None,
            "reply_timeout_ms": int(a.timeout) if a.timeout else None,
        },
        "columns": "passed / failed / could not run (impossible)",
        "servers": data,
        "titles": {sp: titles.get(norm(sp)) for sp in specs},
    }
    with open(os.path.join(a.out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")

    # the table: one row per specification, passed / failed / could not run per server
    head = ["specification"] + a.servers
    compare = "throng" in a.servers and "prosody" in a.servers
    if compare:
        head.append("Throng passes ≥ Prosody")
    rows = []
    for sp in specs:
        title = titles.get(norm(sp))
        name = pretty(sp) + (": " + title if title else "")
        row = [name] + [cell(data[s]["specs"].get(sp)) for s in a.servers]
        if compare:
            t = data["throng"]["specs"].get(sp, {}).get("passed", 0)
            p = data["prosody"]["specs"].get(sp, {}).get("passed", 0)
            row.append("yes" if t >= p else "**no** (%d < %d)" % (t, p))
        rows.append(row)
    tot = ["**total**"] + ["**%d / %d / %d** (of %d)" % (
        data[s]["totals"]["passed"], data[s]["totals"]["failed"],
        data[s]["totals"]["impossible"], data[s]["totals"]["total"]) for s in a.servers]
    if compare:
        behind = sum(1 for r in rows if r[-1] != "yes")
        tot.append("%d of %d behind" % (behind, len(rows)))
    rows.append(tot)

    md = []
    md.append("# Interop suite results, %s\n" % summary["date"])
    md.append("Suite: %s %s (Smack %s), reply timeout %s ms. Each cell: passed / failed / could not run.\n"
              % (summary["suite"]["name"], a.suite_version or "?", summary["suite"]["smack"] or "?", a.timeout or "?"))
    for s in a.servers:
        md.append("- %s: %s" % (s, data[s]["version"] or "?"))
    md.append("")
    md.append("| " + " | ".join(head) + " |")
    md.append("|" + "---|" * len(head))
    for r in rows:
        md.append("| " + " | ".join(r) + " |")
    md.append("")
    for s in a.servers:
        fl = data[s]["failures"]
        md.append("## %s: failed tests (%d)\n" % (s, len(fl)))
        cur = None
        for f in fl:
            if f["spec"] != cur:
                cur = f["spec"]
                md.append("\n**%s**\n" % (pretty(cur) + (": " + titles[norm(cur)] if titles.get(norm(cur)) else "")))
            md.append("- `%s`: %s" % (f["test"], f["message"].replace("|", "\\|")))
        md.append("")
        md.append("### %s: why tests could not run\n" % s)
        for r in data[s]["impossible_reasons"]:
            md.append("- %s (%d): %s" % (pretty(r["spec"]), r["tests"], r["reason"]))
        md.append("")
    with open(os.path.join(a.out, "summary.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(md) + "\n")

    # print the table
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    widths[0] = min(widths[0], 60)
    print()
    for r in [head] + rows:
        print("  ".join((r[i][:widths[i]]).ljust(widths[i]) for i in range(len(r))))
    print("\n(passed / failed / could not run)  %s" % os.path.join(a.out, "summary.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
