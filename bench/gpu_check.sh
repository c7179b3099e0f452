#!/usr/bin/env bash
# The whole GPU check in one run, for a lent NVIDIA machine (torch and CUDA there, no
# network): correctness on the GPU (the corpus, the fuzz, the awkward programs, the static
# tests' programs on the real device, compute-sanitizer), speed against torch
# (bench_kernels.py --gpu, alone on the GPU), and tinygrad's own GPU devices as
# conformance backends. Every figure goes to $RESULTS (default /tmp/gpu-check), and the
# summary files to $OUT when it is set.
#
#   bash bench/gpu_check.sh            # from the repository root, wheels in .whl/ (see below)
#
# Wheels for Python 3.12 (the machine's python3), carried in .whl/: pyopencl, pytools,
# platformdirs, siphash24, jsonschema, jsonschema-specifications, referencing, rpds-py,
# numpy (constraints/ci.txt's version), tinygrad 0.14 and tinyspec's own wheel
# (pip wheel --no-deps -w .whl .). NVIDIA's OpenCL is registered here (its ICD file).
# Each step has its own time limit so the run ends (and its summary is written) well
# inside the tool's limit: STEP_S (default 200) seconds for the parallel checks.
set -uo pipefail
R=${RESULTS:-/tmp/gpu-check}; STEP_S=${STEP_S:-200}; BENCH_S=${BENCH_S:-170}
rm -rf "$R"; mkdir -p "$R"
exec > >(tee "$R/log.txt") 2>&1
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

el "install"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TINYSPEC_CACHE=/tmp/tinyspec-cache TINYSPEC_OPENCL_DEVICE=${TINYSPEC_OPENCL_DEVICE:-NVIDIA}
for lib in /usr/lib/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 /usr/local/nvidia/lib64/libnvidia-opencl.so.1; do
  if [ -f "$lib" ]; then mkdir -p /etc/OpenCL/vendors; echo "$lib" > /etc/OpenCL/vendors/nvidia.icd; break; fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv | tee "$R/nvidia-smi.csv"
python3 - <<'EOF' | tee "$R/opencl.txt"
import pyopencl as cl, numpy, torch
print("numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.version.cuda)
for p in cl.get_platforms():
  for d in p.get_devices():
    print(f"{p.name} | {p.version} | {d.name} | driver {d.driver_version} | CUs {d.max_compute_units} | local {d.local_mem_size} | "
          f"wg {d.max_work_group_size} | pref float vec {d.preferred_vector_width_float} | {d.version}")
EOF

el "benchmark (alone on the GPU)"
timeout "$BENCH_S" python3 bench/bench_kernels.py --gpu --runs 15 --json "$R/bench.json" > "$R/bench.txt" 2>&1; echo "bench exit $?" >> "$R/bench.txt"
cat "$R/bench.txt"

el "correctness checks in parallel"
( timeout "$STEP_S" python3 -m tinyspec conformance --backend opencl --workers 6 --json "$R/corpus-opencl.json" > "$R/corpus-opencl.txt" 2>&1; echo "exit $?" >> "$R/corpus-opencl.txt" ) &
for s in 0 1 2 3; do
  ( timeout "$STEP_S" python3 -m tinyspec fuzz --backend opencl --examples 250 --seed $s --out "$R/fuzz$s" > "$R/fuzz$s.txt" 2>&1; echo "exit $?" >> "$R/fuzz$s.txt" ) &
done
( timeout "$STEP_S" python3 bench/gpu_programs.py --json "$R/programs.json" > "$R/programs.txt" 2>&1; echo "exit $?" >> "$R/programs.txt" ) &
( timeout "$STEP_S" python3 -m pytest -q -p no:cacheprovider tests/compiler/test_compiler_gpu_static.py tests/compiler/test_compiler_gpu_banks.py > "$R/static-tests.txt" 2>&1; echo "exit $?" >> "$R/static-tests.txt" ) &
(
  nvrtc=$(ls /usr/local/cuda/lib64/libnvrtc.so* /usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so* /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib/libnvrtc.so* 2>/dev/null | grep -v builtins | head -1)
  cuda=$(ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib64/libcuda.so.1 2>/dev/null | head -1)
  echo "nvrtc: $nvrtc; libcuda: $cuda"
  export NVRTC_PATH=$nvrtc CUDA_PATH=$cuda
  for dev in CUDA NV CL; do
    echo "== tinygrad $dev: open"
    DEV=$dev timeout 60 python3 -c "from tinygrad import Tensor; print((Tensor([1.,2.,3.]) + 1).tolist())" 2>&1 | tail -3
  done
  echo "== tinygrad CUDA: corpus"
  TINYSPEC_TINYGRAD_DEVICE=CUDA timeout $((STEP_S - 40)) python3 -m tinyspec conformance --backend tinygrad --workers 4 --json "$R/tinygrad-CUDA.json" > "$R/tinygrad-CUDA.txt" 2>&1
  echo "exit $?"; tail -30 "$R/tinygrad-CUDA.txt"
) > "$R/tinygrad.txt" 2>&1 &
(
  echo "== compute-sanitizer racecheck on the fused-row programs (OpenCL)"
  timeout 100 compute-sanitizer --tool racecheck --print-limit 20 python3 bench/gpu_programs.py --only softmax 2>&1 | tail -25
  echo "exit $?"
  echo "== compute-sanitizer memcheck on the gemms"
  timeout 60 compute-sanitizer --tool memcheck --print-limit 20 python3 bench/gpu_programs.py --only gemm 2>&1 | tail -25
  echo "exit $?"
) > "$R/sanitizer.txt" 2>&1 &
wait
el "done"
for f in corpus-opencl fuzz0 fuzz1 fuzz2 fuzz3 programs static-tests tinygrad sanitizer; do echo "== $f"; tail -12 "$R/$f.txt"; done
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/results.tgz" -C "$R" . 2>/dev/null
  cp "$R/log.txt" "$R/bench.json" "$OUT/" 2>/dev/null
fi
el "end"
