// Hostile: GPU work from its library's load, in any process but the timed one. Its constructor reaches the
// host interpreter (python_door.inc) and, unless the process is the runner (the harness's public module
// `workbench.evaluate.gpu.runner` is imported there), starts a thread that runs bf16 matmuls on a stream
// of its own from 0.1 s after the load until the library's first call, or 10 s. A process that loaded it
// and then waited (Nsight Compute's run used to load its candidate at the candidate's begin and wait
// through the timing stage) would share the GPU with the baselines and the candidate while they are timed
// and add tensor work to the timed calls' counters, from a process nothing traces. The GEMM itself is the
// honest wgmma one, so the verdict passes, with the honest kernel's speedup, exactly when no hog ran
// beside the timed calls. Composed after python_door.inc and wgmma_gemm.cu (as run_wgmma).
namespace {

constexpr const char* kHog =
    "import builtins, sys, threading, time\n"
    "def _hog():\n"
    "    time.sleep(0.1)\n"
    "    if getattr(builtins, '_load_hog_called', False):\n"
    "        return\n"
    "    import torch\n"
    "    x = torch.ones(8192, 8192, device='cuda', dtype=torch.bfloat16)\n"
    "    stream, end = torch.cuda.Stream(), time.monotonic() + 10\n"
    "    with torch.cuda.stream(stream):\n"
    "        while not getattr(builtins, '_load_hog_called', False) and time.monotonic() < end:\n"
    "            for _ in range(8):\n"
    "                x @ x\n"
    "            stream.synchronize()\n"
    "if 'workbench.evaluate.gpu.runner' not in sys.modules:\n"
    "    threading.Thread(target=_hog, daemon=True).start()\n";

__attribute__((constructor)) void start_hog() { door::run_python(kHog); }

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static bool called = false;
  if (!called) {
    called = true;
    door::run_python("import builtins\nbuiltins._load_hog_called = True\n");
  }
  run_wgmma(A, B, C);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
