"""Two GPU kernels of the MXFP4 x FP16 grouped GEMM, written the way their ecosystems write them,
for mxdiff's bound mode (python/gpu/README.md). Both take mxdiff's layouts (NumPy arrays: the
check's read-only views) and return a [rows, n] float16 torch tensor on the GPU.

- `triton_dot_scaled`: tl.dot_scaled with the fp16 activations as lhs (no scale) and the packed
  E2M1 weights with their E8M0 scales as rhs, as in Triton's block-scaled matmul tutorial
  (10-block-scaled-matmul) and its tests: Triton's arithmetic, not ours.
- `torch_dequant_matmul`: PyTorch eager: E2M1 lookup x 2^(raw - 127) (raw 255 NaN, the MX spec)
  in float32, cast to float16, then `a @ w.T` (cuBLAS, fp16 in, fp32 accumulation, fp16 out)."""
import inspect
import os
import warnings

import numpy as np
import torch
import triton
import triton.language as tl

_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def _device():
    """Where NumPy inputs go: MXDIFF_GPU_KERNELS_DEVICE, else the GPU where there is one, else the
    CPU (torch's CPU ops; Triton only under TRITON_INTERPRET=1, its interpreter: the tests)."""
    return torch.device(os.environ.get("MXDIFF_GPU_KERNELS_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))


def _device_inputs(a, codes, scales, row_offsets):
    """NumPy arrays (mxdiff.check, the embedded kernel's default) or torch tensors
    (MXDIFF_PYTHON_DEVICE=cuda: already on the GPU) -> the four as torch tensors on _device(), the
    row offsets also as a list. Each crosses at most once: NumPy straight from the (read-only)
    views, a tensor already there not at all."""
    dev = _device()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # read-only views: torch only reads them
        a, codes, scales, row_offsets = ((x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))).to(dev)
                                         for x in (a, codes, scales, row_offsets))
    return a, codes, scales, [int(x) for x in row_offsets.cpu().tolist()]


def _routed(offsets):
    """(group, first row, end row) of every group with rows: the only weights an output reads.
    A 256-expert layer with 6 routed experts is 6 groups of work, not 256."""
    return [(g, offsets[g], offsets[g + 1]) for g in range(len(offsets) - 1) if offsets[g] < offsets[g + 1]]


def _jit(**options):
    """triton.jit with the options this Triton knows (do_not_specialize_on_alignment is recent)."""
    known = inspect.signature(triton.jit).parameters
    return triton.jit(**{name: value for name, value in options.items() if name in known})


# Compiled once per block configuration: what varies from shape to shape is not specialized on
# (Triton would otherwise compile a variant for M == 1, for N or k/32 not a multiple of 16, for a
# scale or output slice not 16-byte aligned, ...). What never varies still is: the unit strides,
# the activation and weight strides (k and k/2, multiples of 16) and those two slices' alignment.
@_jit(do_not_specialize=["M", "N", "K", "stride_sn", "stride_cm"], do_not_specialize_on_alignment=["s_ptr", "c_ptr"])
def _mxfp4_group_kernel(a_ptr, b_ptr, s_ptr, c_ptr, M, N, K,
                        stride_am, stride_ak, stride_bk, stride_bn, stride_sn, stride_sk, stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_kp = tl.arange(0, BLOCK_K // 2)
    offs_ks = tl.arange(0, BLOCK_K // 32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (k[None, :] < K), other=0.0)
        kp = k0 // 2 + offs_kp
        b = tl.load(b_ptr + kp[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(kp[:, None] < K // 2) & (offs_n[None, :] < N), other=0)
        ks = k0 // 32 + offs_ks
        s = tl.load(s_ptr + offs_n[:, None] * stride_sn + ks[None, :] * stride_sk,
                    mask=(offs_n[:, None] < N) & (ks[None, :] < K // 32), other=127)
        acc = tl.dot_scaled(a, None, "fp16", b, s, "e2m1", acc)
    c = acc.to(tl.float16)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, c,
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def triton_dot_scaled(a, codes, scales, row_offsets, block_n=64, block_k=128):
    a, codes, scales, offsets = _device_inputs(a, codes, scales, row_offsets)
    rows, k = a.shape
    n = codes.shape[1]
    out = torch.zeros((rows, n), dtype=torch.float16, device=a.device)
    for g, r0, r1 in _routed(offsets):
        a_g, c_g = a[r0:r1], out[r0:r1]
        b_g = codes[g].t()  # [k/2, n]: E2M1 packed along K, the first element in the low bits
        s_g = scales[g]     # [n, k/32]
        grid = (triton.cdiv(r1 - r0, 16), triton.cdiv(n, block_n))
        _mxfp4_group_kernel[grid](a_g, b_g, s_g, c_g, r1 - r0, n, k,
                                  a_g.stride(0), a_g.stride(1), b_g.stride(0), b_g.stride(1),
                                  s_g.stride(0), s_g.stride(1), c_g.stride(0), c_g.stride(1),
                                  BLOCK_M=16, BLOCK_N=block_n, BLOCK_K=block_k)
    return out


def torch_dequant_matmul(a, codes, scales, row_offsets):
    """Each routed group's weights dequantized (float32, then float16) and multiplied; a group
    without rows is never dequantized (all 256 experts of a real layer would be 1G weights)."""
    a, codes, scales, offsets = _device_inputs(a, codes, scales, row_offsets)
    lut = torch.tensor(_E2M1, dtype=torch.float32, device=a.device)
    out = torch.zeros((a.shape[0], codes.shape[1]), dtype=torch.float16, device=a.device)
    for g, r0, r1 in _routed(offsets):
        unpacked = torch.stack((codes[g] & 0xF, codes[g] >> 4), dim=-1).flatten(-2).long()  # [n, k]
        raw = scales[g].repeat_interleave(32, dim=-1).float()
        scale = torch.where(raw == 255, torch.full_like(raw, float("nan")), torch.exp2(raw - 127))
        w = (lut[unpacked] * scale).to(torch.float16)
        out[r0:r1] = a[r0:r1] @ w.t()
    return out


KERNELS = {"triton": triton_dot_scaled, "torch": torch_dequant_matmul}
