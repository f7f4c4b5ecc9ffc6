"""The package installs as its README says, offline: ``python3 -m venv --system-site-packages V &&
V/bin/pip install --no-build-isolation ./clients/python``; and it needs nothing but the standard library."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from tests.support import PACKAGE_ROOT

import aoi_client


class InstallTest(unittest.TestCase):
    def run_checked(self, cmd, **kwargs) -> str:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)
        if proc.returncode != 0:
            self.fail(
                f"{' '.join(map(str, cmd))} failed with status {proc.returncode}\n{proc.stdout[-3000:]}\n"
                f"{proc.stderr[-3000:]}\n(On Debian 12 this needs python3-venv and python3-wheel: "
                "scripts/setup.sh --tests installs them.)"
            )
        return proc.stdout

    def test_pip_installs_it_offline_in_a_venv(self) -> None:
        with tempfile.TemporaryDirectory(prefix="aoi-pyclient-install-") as tmp:
            # A copy, so that the build's files (build/, *.egg-info) do not land in the source tree.
            src = Path(tmp) / "python"
            shutil.copytree(
                PACKAGE_ROOT, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests")
            )
            venv = Path(tmp) / "V"
            self.run_checked([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
            env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
            env.pop("PYTHONPATH", None)
            self.run_checked([str(venv / "bin" / "pip"), "install", "--no-build-isolation", str(src)], env=env)
            out = self.run_checked(
                [
                    str(venv / "bin" / "python"),
                    "-c",
                    "import aoi_client, pathlib; p = pathlib.Path(aoi_client.__file__).parent; "
                    "print(p); print(aoi_client.__version__); print((p / 'py.typed').is_file()); "
                    "print(aoi_client.Client('http://127.0.0.1:1').base_url)",
                ],
                cwd=tmp,  # not the source tree: the installed package must be the one imported
                env=env,
            )
            location, version, typed, url = out.split()
            self.assertTrue(Path(location).resolve().is_relative_to(venv.resolve()), location)
            self.assertEqual(version, aoi_client.__version__)
            self.assertEqual(typed, "True")
            self.assertEqual(url, "http://127.0.0.1:1")

    def test_only_the_standard_library_is_imported(self) -> None:
        stdlib = set(sys.stdlib_module_names)
        for path in sorted((PACKAGE_ROOT / "aoi_client").glob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    self.assertIn(top, stdlib | {"__future__"}, f"{path.name} imports {name}")

    def test_public_names_exist(self) -> None:
        for name in aoi_client.__all__:
            self.assertTrue(hasattr(aoi_client, name), name)


if __name__ == "__main__":
    unittest.main()
