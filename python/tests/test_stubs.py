"""The type stubs editors read (`bpfemu/__init__.pyi`) describe what the module defines:
mypy's stubtest imports the installed module and compares every name, signature and field."""

import subprocess
import sys
import tempfile


def test_the_stubs_match_the_module():
    # From a directory without a `bpfemu/` source tree, so that the installed module is judged
    # (and mypy's cache is left there).
    with tempfile.TemporaryDirectory() as elsewhere:
        result = subprocess.run(
            [sys.executable, "-m", "mypy.stubtest", "bpfemu"],
            cwd=elsewhere,
            capture_output=True,
            text=True,
            check=False,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout
