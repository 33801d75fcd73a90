#!/usr/bin/env python3
"""Reads the files bpfemu writes for CI tools with those tools' own readers, and prints what
they read as JSON, for the Rust tests to assert on:

  check_ci_formats.py sarif FILE   validate against the SARIF 2.1.0 JSON schema (the OASIS
                                   schema as published in Microsoft's @microsoft/jest-sarif
                                   npm package, fetched once into target/), print the results
  check_ci_formats.py junit FILE   parse with junitparser, print suites and cases

Exit 1 when the file does not validate or parse.
"""
import io
import json
import os
import sys
import tarfile
import urllib.request

SCHEMA_TARBALL = "https://registry.npmjs.org/@microsoft/jest-sarif/-/jest-sarif-1.0.0-beta.0.tgz"
SCHEMA_MEMBER = "package/lib/schemas/sarif-2.1.0-rtm.5.json"


def sarif_schema():
    cache = os.path.join(os.path.dirname(__file__), "..", "target", "sarif-2.1.0-rtm.5.json")
    if not os.path.exists(cache):
        data = urllib.request.urlopen(SCHEMA_TARBALL, timeout=60).read()
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            schema = tar.extractfile(SCHEMA_MEMBER).read()
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        tmp = cache + ".tmp%d" % os.getpid()
        with open(tmp, "wb") as f:
            f.write(schema)
        os.replace(tmp, cache)
    with open(cache) as f:
        return json.load(f)


def check_sarif(path):
    import jsonschema

    with open(path) as f:
        doc = json.load(f)
    schema = sarif_schema()
    validator = jsonschema.Draft4Validator(schema)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        for e in errors[:20]:
            print("%s: %s" % ("/".join(map(str, e.path)), e.message), file=sys.stderr)
        return 1
    results = []
    for run in doc["runs"]:
        rules = [r["id"] for r in run["tool"]["driver"].get("rules", [])]
        for r in run.get("results", []):
            loc = r["locations"][0]["physicalLocation"]
            results.append({
                "ruleId": r["ruleId"],
                "ruleIndexId": rules[r["ruleIndex"]] if "ruleIndex" in r else None,
                "level": r.get("level"),
                "message": r["message"]["text"],
                "uri": loc["artifactLocation"]["uri"],
                "line": loc.get("region", {}).get("startLine"),
                "column": loc.get("region", {}).get("startColumn"),
            })
    print(json.dumps({"valid": True, "results": results}))
    return 0


def check_junit(path):
    from junitparser import JUnitXml, Failure, Error, Skipped

    xml = JUnitXml.fromfile(path)
    suites = []
    for suite in xml:
        cases = []
        for case in suite:
            kind = "passed"
            message = None
            for r in case.result:
                if isinstance(r, Failure):
                    kind = "failure"
                elif isinstance(r, Error):
                    kind = "error"
                elif isinstance(r, Skipped):
                    kind = "skipped"
                message = r.message
            cases.append({"classname": case.classname, "name": case.name,
                          "outcome": kind, "message": message, "time": case.time})
        suites.append({"name": suite.name, "tests": suite.tests, "failures": suite.failures,
                       "errors": suite.errors, "skipped": suite.skipped, "cases": cases})
    print(json.dumps({"suites": suites}))
    return 0


if __name__ == "__main__":
    kind, path = sys.argv[1], sys.argv[2]
    sys.exit({"sarif": check_sarif, "junit": check_junit}[kind](path))
