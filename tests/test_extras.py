"""The core install works without any optional extra; each extra's absence is a clear error naming it."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from optsched.extras import EXTRAS, MissingExtra, require_extra

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: every module an optional extra brings
OPTIONAL = sorted({m for mods in EXTRAS.values() for m in mods})


def _without(modules: list[str], code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter where ``modules`` cannot be imported."""
    block = f"import sys\nfor _m in {modules!r}:\n    sys.modules[_m] = None\n"
    return subprocess.run([sys.executable, "-c", block + code], capture_output=True, text=True, cwd=ROOT, timeout=300)


def _name(requirement: str) -> str:
    return requirement.split(";")[0].split("[")[0].split("=")[0].split("<")[0].split(">")[0].split("@")[0].strip().lower()


def test_pyproject_core_has_no_optional_dependency_and_every_extra_is_declared() -> None:
    """Core dependencies bring none of the extras' modules; EXTRAS matches pyproject's extras;
    `dev` brings every extra but ray (the test suite's needs)."""
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not core & set(OPTIONAL), core & set(OPTIONAL)
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(EXTRAS) | {"dev"} == set(extras)
    for extra, modules in EXTRAS.items():
        assert {m.lower() for m in modules} <= {_name(r) for r in extras[extra]}, extra
    dev = " ".join(extras["dev"])
    for extra in set(EXTRAS) - {"ray"}:
        assert extra in dev.split("[", 1)[1].split("]")[0].split(","), extra
    highspy = [r for r in PYPROJECT["project"]["dependencies"] if _name(r) == "highspy"]
    assert highspy == ["highspy==1.12.0"]  # the pin beside ortools' own HiGHS (tests/test_imports.py)


def test_core_cli_and_solve_run_without_any_extra(tmp_path: Path) -> None:
    """gen, solve (learned and auto), check and simulate work with every optional module blocked."""
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time_s,duration_s,num_gpus,gpu_fraction,cpu_cores,mem_gib,tenant,user,status,gpu_type,censored\n"
                     + "".join(f"j{i},{60 * i},{600 + 50 * i},{1 + i % 2},1.0,,,vc,,,,0\n" for i in range(6)))
    code = f"""
from optsched.cli import main
from optsched import load_instance, solve_round
d = {str(tmp_path)!r}
assert main(["gen", "--nodes", "4", "--jobs", "12", "--seed", "3", "-o", d + "/r.json"]) == 0
assert main(["solve", d + "/r.json", "--method", "learned", "-o", d + "/s.json"]) == 0
assert main(["check", d + "/r.json", d + "/s.json"]) == 0
assert main(["solve", d + "/r.json", "--time-limit", "2", "-o", d + "/a.json"]) == 0
assert main(["simulate", {str(trace)!r}, "--cluster", "2x8", "--time-limit", "1", "--round", "5m", "--no-progress", "-o", d + "/sim"]) == 0
r = solve_round(load_instance(d + "/r.json"), method="learned")
print(sorted(m for m in {OPTIONAL!r} if sys.modules.get(m) is not None))
"""
    p = _without(OPTIONAL, code)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "[]"
    assert json.loads((tmp_path / "s.json").read_text())["solver"] == "maifs"


@pytest.mark.parametrize(("module", "extra", "code"), [
    ("fastapi", "service", "import optsched.service"),
    ("uvicorn", "service", "from optsched.cli import main; sys.exit(main(['serve', '--port', '0']))"),
    ("matplotlib", "plot", "from optsched.sim.plots import plot_queue; plot_queue({})"),
    ("matplotlib", "plot", "from optsched.bench.plots import plot_bounds_over_time; plot_bounds_over_time({})"),
    # before the replay or the sweep runs (/nonexistent: a run would fail on it first)
    ("matplotlib", "plot", "from optsched.cli import main; sys.exit(main(['simulate', '/nonexistent.csv', '--plot']))"),
    ("matplotlib", "plot", "from optsched.cli import main; sys.exit(main(['bench', '/nonexistent', '--plot', '/tmp/p']))"),
    ("gymnasium", "rl", "import optsched.envs"),
    ("pettingzoo", "rl", "from optsched.envs import RoundAECEnv"),
    ("torch", "train", "from optsched.cli import main; sys.exit(main(['train', '--out', '/nonexistent']))"),
    ("torch", "train", "import optsched.learned.policy"),
    ("ray", "ray", "from optsched.parallel import get_backend; get_backend('ray')"),
    ("cvxpy", "cvxpy", "from optsched.gen import generate; from optsched.mip.bound import lp_bound; lp_bound(generate(2, 3, seed=0), backend='cvxpy')"),
])
def test_a_missing_extra_is_named(module: str, extra: str, code: str) -> None:
    """Without the module, the feature fails with a message naming the extra and how to install it
    (the CLI: exit 2, no traceback)."""
    p = _without([module], code)
    assert p.returncode != 0
    assert f"optional extra '{extra}'" in p.stderr and f'pip install ".[{extra}]"' in p.stderr, p.stderr[-2000:]
    if "main(" in code:
        assert p.returncode == 2 and "Traceback" not in p.stderr


def test_require_extra() -> None:
    assert require_extra("json", "plot", "x") is json
    with pytest.raises(MissingExtra, match="needs no_such_module_xyz.*'plot'") as e:
        require_extra("no_such_module_xyz", "plot", "drawing")
    assert isinstance(e.value, ImportError) and e.value.extra == "plot"
    with pytest.raises(ValueError, match="unknown extra"):
        require_extra("json", "gpu", "x")
