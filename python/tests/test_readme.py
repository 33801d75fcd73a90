"""The README's pytest example runs as written."""

import re

from conftest import REPO


def test_the_readme_example_passes(monkeypatch):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Python: pytest and Scapy") :]
    (example,) = re.findall(r"```python\n(.*?)```", section, re.S)[:1]
    assert len(example.strip().splitlines()) <= 10
    monkeypatch.chdir(REPO)  # its paths are the repository's
    scope: dict = {}
    exec(compile(example, "README.md", "exec"), scope)
    tests = [f for name, f in scope.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()
