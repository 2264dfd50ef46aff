"""Ray for a bare GPU host, small enough to travel with the checkout (the device's 64 MiB carry).

    python3 benchmarks/ray_h200_kit.py [--out .whl-ray]

Ray 2.60.0's wheel for CPython 3.12 on x86-64 is 79 MB, 32 MB of it the Java workers' jar. This
downloads it and the wheels of its own requirements (the dev lock's versions), drops what a sweep's
actors never load (the jar, the dashboard's web client, RLlib, Serve, Data, Train, Tune, the LLM
libraries) and packs the rest as one xz tarball; the requirements stay wheels. On the GPU host:

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        .whl-ray/*.whl && tar xJf .whl-ray/ray-trimmed.tar.xz -C /tmp/site && export PYTHONPATH=/tmp/site:$PWD

`--check` unpacks the trimmed tree for this machine's Python instead (its own wheel) and runs a task
and an actor on a local cluster through it, so the trimming is known not to remove what Ray needs.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAY = "ray==2.60.0"
# Ray's own requirements and theirs (jsonschema, requests), at the dev lock's versions.
REQUIREMENTS = (
    "click", "filelock", "jsonschema", "jsonschema-specifications", "referencing", "rpds-py", "attrs",
    "msgpack", "packaging", "protobuf", "pyyaml", "requests", "urllib3", "certifi", "charset-normalizer",
    "idna",
)  # fmt: skip
DROPPED = ("ray/jars/", "ray/dashboard/client/", "ray/rllib/", "ray/serve/", "ray/data/", "ray/train/",
           "ray/tune/", "ray/llm/")  # fmt: skip
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")


def locked(name: str, text: str) -> str:
    """`name==VERSION` as the lock `text` pins it."""
    found = re.search(rf"^{re.escape(name)}==([^\s\\]+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"{name} is not in requirements/dev.lock")
    return f"{name}=={found.group(1)}"


def download(specs: list[str], into: Path, python: str | None) -> None:
    target = []
    if python is not None:
        target = ["--python-version", python, "--implementation", "cp"]
        for platform in PLATFORMS:
            target += ["--platform", platform]
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *target,
               "-d", str(into), *specs]  # fmt: skip
    subprocess.run(command, check=True)


def trimmed_tree(wheel: Path, into: Path) -> int:
    """Unpack `wheel` into `into` without the dropped folders; the bytes left out."""
    left_out = 0
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            if member.filename.startswith(DROPPED):
                left_out += member.file_size
                continue
            path = Path(archive.extract(member, into))
            mode = (
                member.external_attr >> 16
            )  # zip keeps no modes for extract: the servers must stay executable
            if mode:
                path.chmod(mode & 0o777)
    return left_out


def check(tree: Path) -> None:
    """A task and an actor on a fresh local cluster, importing Ray from `tree` only."""
    code = (
        "import ray\n"
        f"assert ray.__file__.startswith({str(tree)!r}), ray.__file__\n"
        "ray.init(num_cpus=1, include_dashboard=False)\n"
        "@ray.remote\n"
        "def square(x):\n    return x * x\n"
        "@ray.remote\n"
        "class Counter:\n    def __init__(self):\n        self.n = 0\n"
        "    def add(self):\n        self.n += 1\n        return self.n\n"
        "counter = Counter.remote()\n"
        "assert ray.get([square.remote(i) for i in range(4)]) == [0, 1, 4, 9]\n"
        "assert ray.get([counter.add.remote() for _ in range(3)]) == [1, 2, 3]\n"
        "ray.shutdown()\n"
        "print('trimmed Ray: a task and an actor ran')\n"
    )
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()}
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip
    print(done.stdout.strip() or done.stderr.strip()[-2000:])
    if done.returncode != 0:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".whl-ray")
    parser.add_argument("--check", action="store_true", help="trim this machine's own wheel and run it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        download([RAY], work, None if args.check else "3.12")
        wheel = next(work.glob("ray-*.whl"))
        tree = work / "tree"
        left_out = trimmed_tree(wheel, tree)
        kept = sum(f.stat().st_size for f in tree.rglob("*") if f.is_file())
        print(f"{wheel.name}: {wheel.stat().st_size / 1e6:.1f} MB; left out {left_out / 1e6:.1f} MB unpacked, "
              f"kept {kept / 1e6:.1f} MB unpacked")  # fmt: skip
        if args.check:
            check(tree)
            return
        args.out.mkdir(parents=True, exist_ok=True)
        packed = args.out / "ray-trimmed.tar.xz"
        with tarfile.open(packed, "w:xz", preset=6) as archive:
            for entry in sorted(tree.iterdir()):
                archive.add(entry, arcname=entry.name)
        lock = (ROOT / "requirements" / "dev.lock").read_text()
        download([locked(name, lock) for name in REQUIREMENTS], args.out, "3.12")
    total = sum(f.stat().st_size for f in args.out.iterdir())
    print(f"{packed}: {packed.stat().st_size / 1e6:.1f} MB; {args.out} in all {total / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
