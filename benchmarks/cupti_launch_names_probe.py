"""Probe (GPU host): can a process whose main thread waits on a kernel that never ends still say which
kernel that is? Answers the three facts a timeout message needs, printed as one JSON line each:

1. `api`: what cupti-python's callback API offers (subscribe, enable_domain, the driver domain's
   callback data fields).
2. `launch`: a driver-API callback on kernel launches sees the kernel's name at launch time (the name
   is what activity records give only when a kernel completes).
3. `hung`: with the main thread blocked in `torch.cuda.synchronize()` behind a spinning kernel, a
   second thread woken by a byte on a pipe (as the worker would write it from outside) runs, flushes
   CUPTI's activity buffers and reads both: the completed kernels' records and the launch names. The
   process then leaves with `os._exit` (the kernel never ends).

Run: `python benchmarks/cupti_launch_names_probe.py` (a timer thread writes the byte after 2 s).
"""

from __future__ import annotations

import json
import os
import threading
import time

import torch
import triton
import triton.language as tl
from cupti import cupti


@triton.jit
def _spin(flag, out):
    # Waits for a flag nobody sets: a kernel that never ends.
    value = tl.load(flag, volatile=True)
    while value == 0:
        value = tl.load(flag, volatile=True)
    tl.store(out, value)


@triton.jit
def _quick(out):
    tl.store(out, 1)


def main() -> int:
    print(
        json.dumps(
            {
                "api": sorted(
                    n
                    for n in dir(cupti)
                    if "callback" in n.lower() or "subscribe" in n.lower() or "domain" in n.lower()
                )
            }
        )
    )
    print(json.dumps({"domains": [str(d) for d in cupti.CallbackDomain]}), flush=True)
    kernels: list[list] = []
    api: list[list] = []

    def requested():
        return 8 * 1024 * 1024, 0

    def completed(activities) -> None:
        for act in activities:
            if act.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                kernels.append([act.name, act.correlation_id])
            elif act.kind in (cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER):
                api.append([int(act.kind), act.cbid, act.correlation_id])

    cupti.activity_register_callbacks(requested, completed)
    for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER):
        cupti.activity_enable(kind)

    launches: list[list] = []
    fields: list[str] = []

    def on_call(userdata, domain, cbid, data) -> None:
        if not fields:
            fields.extend(n for n in dir(data) if not n.startswith("_"))
        name = getattr(data, "symbol_name", None)
        site = getattr(data, "callback_site", None)
        if name:
            launches.append(
                [
                    str(site),
                    getattr(data, "function_name", None),
                    name,
                    getattr(data, "correlation_id", None),
                    cbid,
                ]
            )

    subscriber = cupti.subscribe(on_call, None)
    cupti.enable_domain(1, subscriber, cupti.CallbackDomain.DRIVER_API)

    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    _quick[(1,)](out)
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    print(json.dumps({"launch": launches[-4:], "fields": fields, "kernels": kernels[-4:]}), flush=True)

    # Runtime launches (torch's elementwise kernels go through cudaLaunchKernel, as nvcc's <<<>>> does):
    # does the driver domain see them, with the kernel's name?
    launches.clear()
    torch.ones(4, device="cuda").add_(1)
    torch.cuda.synchronize()
    print(
        json.dumps({"runtime_launch": [entry for entry in launches if "Launch" in str(entry[1])]}), flush=True
    )
    # And the runtime domain itself (cupti-python lists it among its enums, not among its supported
    # callback domains): does enabling it work, and do its launches carry the name?
    launches.clear()
    try:
        cupti.enable_domain(1, subscriber, cupti.CallbackDomain.RUNTIME_API)
        torch.ones(4, device="cuda").add_(1)
        torch.cuda.synchronize()
        cupti.enable_domain(0, subscriber, cupti.CallbackDomain.RUNTIME_API)
        runtime = {"runtime_domain": [entry for entry in launches if "aunch" in str(entry[1])]}
    except Exception as exc:  # noqa: BLE001 - the answer is the point
        runtime = {"runtime_domain_error": f"{type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(runtime), flush=True)
    # Host cost of the callback per launch: 2000 launches with the domain on, then off.
    costs = {}
    for state in (1, 0):
        cupti.enable_domain(state, subscriber, cupti.CallbackDomain.DRIVER_API)
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(2000):
            _quick[(1,)](out)
        costs["on" if state else "off"] = round((time.perf_counter() - started) / 2000 * 1e6, 2)
        torch.cuda.synchronize()
    print(json.dumps({"launch_us": costs}), flush=True)
    cupti.enable_domain(1, subscriber, cupti.CallbackDomain.DRIVER_API)
    launches.clear()
    kernels.clear()
    api.clear()
    wake_read, wake_write = os.pipe()
    woke: dict[str, object] = {}

    def watchdog() -> None:
        os.read(wake_read, 1)
        started = time.perf_counter()
        cupti.activity_flush_all(1)
        woke.update(
            flushed_s=round(time.perf_counter() - started, 4),
            launches=list(launches),
            kernels=list(kernels),
            api=list(api)[-12:],
        )
        print(json.dumps({"hung": woke}), flush=True)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    threading.Timer(2.0, lambda: os.write(wake_write, b"w")).start()
    _quick[(1,)](out)
    torch.cuda.synchronize()
    _quick[(1,)](out)
    _spin[(1,)](flag, out)
    torch.cuda.synchronize()
    print(json.dumps({"error": "the spinning kernel ended"}))
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
