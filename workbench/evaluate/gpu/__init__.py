"""The GPU side: the worker, the candidate's processes, the judge, the tool processes and the tiers
they run. Standard library, torch, apache-tvm-ffi and (optionally) cupti-python only."""
