"""Write the GEMM ladder as a `scripted:` model file: one assistant turn per ladder step.

The recorded demo session is `ptxwb run` playing this script, so every verdict and timing in it was
measured by the workbench itself; the header says `scripted`, never a model name.

    python references/ladder_script.py /tmp/gemm_ladder.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "gemm"
STEPS = [
    (
        "01_simt.cu",
        (
            "Step 1 of the ladder: a tiled SIMT GEMM in shared memory. It is correct, but it uses "
            "no Hopper instruction, so the static tier should reject it."
        ),
    ),
    (
        "02_wgmma.cu",
        (
            "Step 2: the same tiling, with the inner product on the tensor cores through "
            "`wgmma.mma_async` (m64nNk16, both operands from shared memory through matrix descriptors). "
            "Loads are still plain copies by the threads."
        ),
    ),
    (
        "03_tma_pipeline.cu",
        (
            "Step 3: the tiles arrive by TMA (`cp.async.bulk.tensor`) into a multi-stage "
            "ring, each stage guarded by an mbarrier with an expected byte count, so loads overlap the wgmma."
        ),
    ),
    (
        "04_ws_persistent.cu",
        (
            "Step 4: warp specialisation. A producer warpgroup issues TMA (multicast across a "
            "cluster pair) while two consumer warpgroups run wgmma with `setmaxnreg`-rebalanced registers; "
            "the grid is persistent and the epilogue stores through TMA."
        ),
    ),
]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python references/ladder_script.py OUT.json")
    turns = [f"{text}\n\n```cuda\n{(HERE / name).read_text()}```\n" for name, text in STEPS]
    Path(sys.argv[1]).write_text(json.dumps(turns, indent=1))


if __name__ == "__main__":
    main()
