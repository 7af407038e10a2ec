"""mxdiff from Python: the C++ oracle, formats, admission rule, audit and case format of this
repository (bound through nanobind, never re-implemented), and `check`, which runs a Python
kernel on mxdiff cases in bits mode or bound mode (python/README.md)."""
from __future__ import annotations

import dataclasses
import hashlib
import operator
import os
import shlex
import tempfile
import traceback as _traceback
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from . import _core

__all__ = [
    "TRANSFORMS", "CHECK_TRANSFORMS", "MX_SPEC", "MODELS", "Tactic", "Case", "Finding", "Admission",
    "e2m1_decode", "e2m1_encode", "e8m0_decode", "e8m0_encode", "pack_codes", "unpack_codes",
    "dequantize", "prepared_scale", "transform_table", "mx_spec_table", "spec_deviation_table",
    "spec_deviation_counts_of_column",
    "spec_deviations_of_column", "activation_specials_of_row",
    "explain_element", "explain_spec_element", "spec_scale_ranges_of_column", "admit", "audit",
    "fold_admitted_set", "admission_rule_version", "reference_gemm", "model_error_bound",
    "read_case", "read_case_bytes", "decode_case", "generate_case", "generate_cases", "write_case", "check",
]

TRANSFORMS = ("ordinary", "folded")  # the SM70 kernels' contracts (reference/transform.h)
# The OCP MX v1.0 specification's element values as the contract: bound mode only, its weights
# are not fp16 values (docs/numerics.md: "The MX specification as the contract").
MX_SPEC = "mx-spec"
CHECK_TRANSFORMS = TRANSFORMS + (MX_SPEC,)
MODELS = ("v100", "sm90-emulated", "sm90-emulated-ftz", "exact")


def _integer(name: str, value, bits: int, signed: bool = True, low: Optional[int] = None,
             high: Optional[int] = None) -> int:
    """`value` as a Python int that fits the C++ parameter it is passed to (`bits` wide): an
    OverflowError naming the argument and its range, never nanobind's anonymous TypeError (or a
    silent wrap to another value)."""
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if low is None:
        low = -(1 << (bits - 1)) if signed else 0
    if high is None:
        high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    if not low <= number <= high:
        raise OverflowError(f"{name}={number} is out of range: an integer in [{low}, {high}]")
    return number


def _int32(name: str, value) -> int:
    return _integer(name, value, 32)


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _cpu_array(x, dtype):
    """A C-contiguous array of `dtype` for _core; torch CPU tensors and NumPy arrays of that
    dtype pass through without a copy (nanobind reads them through DLPack / the buffer). fp16
    data must be float16 (or its uint16 bits): other floats are refused, never rounded here;
    integers are converted only where no value changes."""
    if _is_torch(x):
        return x.contiguous()
    if hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        return x  # any DLPack producer: nanobind imports it in place and checks its dtype
    array = np.asarray(x)
    if dtype == np.float16:
        if array.dtype not in (np.float16, np.uint16):
            raise TypeError(f"expected float16 (or its uint16 bits), got {array.dtype}")
        return np.ascontiguousarray(array)
    if array.dtype != dtype:
        if array.dtype.kind not in "iub" or not np.array_equal(array.astype(dtype), array):
            raise TypeError(f"expected {np.dtype(dtype).name}, got {array.dtype}")
        array = array.astype(dtype)
    return np.ascontiguousarray(array)


# ---------------------------------------------------------------- formats
def _elementwise(convert, values, dtype) -> np.ndarray:
    """`convert` (a _core function over a flat array) applied to `values` as `dtype`, same shape."""
    values = np.asarray(values, dtype=dtype)
    return convert(np.ascontiguousarray(values).ravel()).reshape(values.shape)


def e2m1_decode(codes) -> np.ndarray:
    """E2M1 code (low 4 bits) -> its value, float32, same shape."""
    return _elementwise(_core.e2m1_decode, codes, np.uint8)


def e2m1_encode(values) -> np.ndarray:
    """Value -> the nearest E2M1 code (ties to the even code, saturating at +-6, -0.0 -> 8)."""
    return _elementwise(_core.e2m1_encode, values, np.float64)


def e8m0_decode(scales) -> np.ndarray:
    """UE8M0 byte -> 2^(raw - 127) as float64; 255 is NaN (the OCP MX spec)."""
    return _elementwise(_core.e8m0_decode, scales, np.uint8)


def e8m0_encode(values) -> np.ndarray:
    """Positive value -> the byte of the largest power of two <= it (clamped to 0..254); NaN, +Inf -> 255."""
    return _elementwise(_core.e8m0_encode, values, np.float64)


def unpack_codes(packed) -> np.ndarray:
    """[..., K/2] packed bytes -> [..., K] codes (the low nibble holds the even k)."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = packed & 0xF
    out[..., 1::2] = packed >> 4
    return out


def pack_codes(codes) -> np.ndarray:
    codes = np.asarray(codes, dtype=np.uint8)
    return ((codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)).astype(np.uint8)


def dequantize(transform: str, codes, scales) -> np.ndarray:
    """The kernels' fp16 weight for each (code, raw scale byte) pair under a transform."""
    codes = np.asarray(codes, dtype=np.uint8)
    scales = np.broadcast_to(np.asarray(scales, dtype=np.uint8), codes.shape)
    bits = _core.dequantize(transform, np.ascontiguousarray(codes).ravel(), np.ascontiguousarray(scales).ravel())
    return bits.view(np.float16).reshape(codes.shape)


def prepared_scale(transform: str, raw: int) -> int:
    """The fp16 bits a raw scale byte is prepared into (reference/transform.h)."""
    return _core.prepared_scale(transform, _integer("raw", raw, 8, signed=False))


def transform_table(transform: str = "ordinary") -> np.ndarray:
    """[256, 16] float16: the weight of code c under raw scale byte r is table[r, c]."""
    return _core.transform_table(transform).view(np.float16)


def mx_spec_table() -> np.ndarray:
    """[256, 16] float64: the MX spec's value of code c under raw scale byte r, e2m1(c) x 2^(r - 127)
    exactly (raw 255: NaN); beyond fp16's range for most r, beyond fp32's at r = 254 with |e2m1| >= 2."""
    return _core.mx_spec_table()


def spec_deviation_table(transform: str = "ordinary") -> np.ndarray:
    """[256, 16] uint8: how the transform's weight relates to the MX spec's value (names in
    `spec_deviation_names()`: none, flushed-to-zero, saturated, ...)."""
    return _core.spec_deviation_table(transform)


def spec_deviation_names() -> list:
    return _core.spec_deviation_names()


fold_admitted_set = _core.fold_admitted_set
admission_rule_version = _core.admission_rule_version


def model_error_bound(abs_sum: float, steps: int, splits: int) -> float:
    """ModelErrorBound (reference/error_bound.h): the proven bound of every step model."""
    return _core.model_error_bound(abs_sum, _int32("steps", steps), _int32("splits", splits))


@dataclasses.dataclass
class Admission:
    admitted: bool
    refused_count: int
    refused: list  # [(index, raw)], the first max_reported
    description: str
    rule_version: str


def admit(scales, max_reported: int = 16) -> Admission:
    """The fold admission of one layer's scale bytes (reference/admission.h: AdmitLayer)."""
    return Admission(**_core.admit(_cpu_array(scales, np.uint8), _integer("max_reported", max_reported, 64,
                                                                           signed=False)))


@dataclasses.dataclass
class AuditReport:
    status: int  # mxdiff audit's exit status: 0 admitted, 1 a layer refused, 2 an error
    report: str  # its text report, or its JSON with json=True
    errors: list = dataclasses.field(default_factory=list)  # the lines `mxdiff audit` prints on stderr


def audit(paths, *, keep_going: bool = False, pattern: Optional[str] = None, json: bool = False) -> AuditReport:
    """`mxdiff audit` on checkpoint files (checkpoint/audit.h): the same verdicts and report; the
    errors it would print on stderr are in `errors` (the text report only counts them)."""
    if isinstance(paths, (str, bytes, os.PathLike)):  # one path (bytes too), not a sequence of them
        paths = [paths]
    if pattern == "":  # as `mxdiff audit --pattern=`: an empty expression would select nothing
        raise ValueError("pattern is empty: give a regular expression over whole tensor names, or None for the "
                         "default selection")
    return AuditReport(*_core.audit([os.fsdecode(p) for p in paths], keep_going, pattern, json))


# ---------------------------------------------------------------- the oracle
@dataclasses.dataclass(frozen=True)
class Tactic:
    """Only cta_k and splits decide the split-K partition, hence the bits."""
    cta_k: int = 32
    splits: int = 1


def _tactic(tactic) -> Tactic:
    if tactic is None:
        return Tactic()
    if isinstance(tactic, Tactic):
        t = tactic
    elif isinstance(tactic, dict):
        t = Tactic(**tactic)
    else:
        t = Tactic(*tactic)
    return Tactic(_int32("tactic.cta_k", t.cta_k), _int32("tactic.splits", t.splits))


def reference_gemm(activations, codes, scales, row_offsets, n: int, k: int, *, transform: str = "ordinary",
                   model: str = "sm90-emulated", tactic=None, threads: int = 0, f32: bool = False):
    """The C++ reference GEMM: [rows, n] float16 (float32 with f32=True), bit for bit the
    oracle's. NumPy arrays and CPU torch tensors are read in place; torch in, torch out."""
    t = _tactic(tactic)
    args = (_cpu_array(activations, np.float16), _cpu_array(codes, np.uint8), _cpu_array(scales, np.uint8),
            _cpu_array(row_offsets, np.int32), _int32("n", n), _int32("k", k), transform, model, t.cta_k, t.splits,
            _int32("threads", threads))
    out = (_core.reference_gemm_f32(*args).view(np.float32) if f32 else _core.reference_gemm(*args).view(np.float16))
    if _is_torch(activations):
        import torch
        return torch.from_numpy(out)
    return out


# ---------------------------------------------------------------- cases
class Case:
    """One fuzz case (fuzz/formats/case_format.h, format v2). Tensors are views of the case."""

    def __init__(self, data: "_core.CaseData", path: Optional[str] = None):
        self._data = data
        self.path = path

    groups = property(lambda self: self._data.groups)
    n = property(lambda self: self._data.n)
    k = property(lambda self: self._data.k)
    rows = property(lambda self: self._data.rows)
    tactic = property(lambda self: self._data.tactic)

    @property
    def activations(self) -> np.ndarray:
        """[rows, k] float16 (a view)."""
        return self._data.activation_bits.view(np.float16)

    @property
    def codes(self) -> np.ndarray:
        """[groups, n, k/2] packed E2M1 codes (a view)."""
        return self._data.codes

    @property
    def scales(self) -> np.ndarray:
        """[groups, n, k/32] UE8M0 bytes (a view)."""
        return self._data.scales

    @property
    def row_offsets(self) -> np.ndarray:
        return self._data.row_offsets

    def _get(name):
        return property(lambda self: getattr(self._data, name), lambda self, v: setattr(self._data, name, v))

    def _get_int32(name):
        return property(lambda self: getattr(self._data, name),
                        lambda self, v: setattr(self._data, name, _int32(name, v)))

    model = _get("model")
    request = _get("request")
    cta_k = _get_int32("cta_k")
    splits = _get_int32("splits")
    del _get, _get_int32

    def describe(self) -> str:
        return self._data.describe()

    def encode(self) -> bytes:
        return self._data.encode()

    def write(self, path) -> str:
        with open(path, "wb") as f:
            f.write(self.encode())
        return os.fspath(path)

    def copy(self) -> "Case":
        return Case(self._data.copy(), self.path)

    def reference(self, *, transform: Optional[str] = None, model: Optional[str] = None, tactic=None) -> np.ndarray:
        """The oracle's output for this case (by default under the case's own settings)."""
        if transform is None:
            transform = "folded" if self.request == "folded" else "ordinary"
        return reference_gemm(self.activations, self.codes, self.scales, self.row_offsets, self.n, self.k,
                              transform=transform, model=model or self.model,
                              tactic=tactic or Tactic(self.cta_k, self.splits))

    def __repr__(self) -> str:
        where = f" {self.path}" if self.path else ""
        return f"<mxdiff.Case{where} groups={self.groups} rows={self.rows} n={self.n} k={self.k} {self.model}>"


def decode_case(data: bytes, path: Optional[str] = None) -> Case:
    """Decodes (strictly: ValueError naming the field) and materializes a .case file's bytes."""
    return Case(_core.decode_case(bytes(data)), path)


def read_case_bytes(path) -> bytes:
    """A case file's bytes, read as repro reads one: a FIFO or socket is refused before it is
    opened (tools/cli/input_file.h, which would block), and at most one byte more than the
    largest valid case is read (so /dev/zero or a huge file is refused at once): ValueError."""
    path = os.fsdecode(path)
    _core.refuse_stream_input(path)
    limit = _core.max_case_bytes()
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is not a valid case: larger than any case can be ({limit} bytes at most)")
    return data


def read_case(path) -> Case:
    return decode_case(read_case_bytes(path), os.fsdecode(path))


def write_case(case: Case, path) -> str:
    return case.write(path)


def generate_case(seed: int, n: int, k: int, rows_per_group: Sequence[int], *, activations: Optional[str] = None,
                  codes: Optional[str] = None, scales: Optional[str] = None, model: str = "sm90-emulated",
                  request: str = "ordinary", tactic=None) -> Case:
    """A format-v2 case of this shape whose tensors are generator recipes drawn from `seed`
    (value classes of fuzz/formats/tensor_recipe.h: normal, subnormal, specials, narrow,
    uniform, checkpoint for scales), unless a class is named."""
    t = _tactic(tactic)
    rows = [_int32(f"rows_per_group[{i}]", r) for i, r in enumerate(rows_per_group)]
    return Case(_core.generate_case(_integer("seed", seed, 64, signed=False), _int32("n", n), _int32("k", k), rows,
                                    activations, codes, scales, model, request, t.cta_k, t.splits))


# Small shapes of the real decode's kinds: a few experts, some empty, K over several blocks.
_SHAPES = ((16, 64, (3,)), (8, 128, (2, 0, 1)), (32, 32, (1,)), (24, 96, (4, 2)), (8, 256, (0, 5)),
           (40, 64, (1, 1, 1, 1)), (16, 160, (6,)), (64, 32, (2, 0, 0, 3)))


def generate_cases(count: int, seed: int = 0, *, shapes=None, **kwargs) -> list:
    """`count` cases from consecutive seeds, cycling over small decode-like shapes."""
    shapes = shapes or _SHAPES
    count = _integer("count", count, 32, low=0)
    seed = _integer("seed", seed, 64, signed=False, high=((1 << 64) - 1 - count) // 1_000_003)
    out = []
    for i in range(count):
        n, k, rows = shapes[(seed + i) % len(shapes)]
        out.append(generate_case(seed * 1_000_003 + i, n, k, rows, **kwargs))
    return out


# ---------------------------------------------------------------- check
@dataclasses.dataclass
class Finding:
    kind: str  # python/bits, python/bound, python/specials, python/raised, python/shape, python/timeout,
    # python/inputs-modified
    message: str
    case_path: str
    case: Case
    traceback: Optional[str] = None
    mismatches: int = 0
    first: Optional[tuple] = None  # (row, column)
    reproduced_by: list = dataclasses.field(default_factory=list)  # [(transform, model, splits)]

    def __str__(self) -> str:
        text = f"{self.kind}: {self.message}\n  case: {self.case_path} (explain: {repro_command(self.case_path)})"
        if self.traceback:
            text += "\n  traceback:\n" + "".join("    " + line + "\n" for line in self.traceback.rstrip().splitlines())
        return text


def repro_command(case_path: str) -> str:
    """The shell command that explains a case: the repro program of $MXDIFF_REPRO (its path, which
    the build or a campaign sets), else the libFuzzer build's, as the README's everyday use names it."""
    program = os.environ.get("MXDIFF_REPRO") or "build-fuzz/tools/repro/repro"
    return f"{shlex.quote(program)} {shlex.quote(os.fspath(case_path))}"


_INPUT_NAMES = ("activations", "codes", "scales", "row_offsets")


def _private_inputs(inputs) -> list:
    """Copies of the case's tensors for the kernel, over immutable bytes: numpy refuses to make
    them writeable again (a view of the case's own memory could be flipped writeable) and no view
    reaches the case. A kernel can still write through a raw pointer (ctypes, torch.from_numpy):
    the reference never reads these copies, and _modified_input compares them afterwards."""
    return [np.frombuffer(np.ascontiguousarray(x).tobytes(), dtype=x.dtype).reshape(x.shape) for x in inputs]


def _modified_input(originals, copies) -> Optional[str]:
    """None where the kernel left every input as it got it; else which input it changed, how
    many elements and the first one (by its bits: a NaN that stays NaN is unchanged)."""
    for name, before, after in zip(_INPUT_NAMES, originals, copies):
        unsigned = np.dtype(f"u{before.dtype.itemsize}")
        b, a = np.asarray(before).view(unsigned), np.asarray(after).view(unsigned)
        changed = np.argwhere(b != a)
        if len(changed):
            where = tuple(int(x) for x in changed[0])
            value = lambda bits: _f16(bits[where]) if name == "activations" else str(bits[where].view(before.dtype))
            return (f"the kernel wrote into its input {name}: {len(changed)} of {b.size} elements changed; "
                    f"first {where}: {value(b)} became {value(a)}")
    return None


def _kernel_output(result, rows: int, n: int):
    """The kernel's result as a [rows, n] float16 NumPy array, or the reason it is not one."""
    if _is_torch(result):
        result = result.detach().cpu().numpy()
    if not isinstance(result, np.ndarray):
        return None, f"returned {type(result).__name__}, expected a float16 array of shape ({rows}, {n})"
    if result.dtype != np.float16 or result.shape != (rows, n):
        return None, f"returned {result.dtype} {result.shape}, expected float16 ({rows}, {n})"
    return np.ascontiguousarray(result), None


def _f16(bits) -> str:
    value = np.uint16(bits).view(np.float16)
    return f"0x{int(bits):04x} ({float(value)!r})"


def reproducing_arithmetics(case: Case, output_bits: np.ndarray, splits_tried=(1, 2, 3, 4)) -> list:
    """Every (transform, model, splits) with cta_k 32 whose reference gives exactly these bits."""
    found = []
    for transform in TRANSFORMS:
        for model in MODELS:
            seen = set()
            for s in splits_tried:
                s_eff = _core.effective_splits(case.k, 32, s)
                if s_eff in seen:
                    continue
                seen.add(s_eff)
                ref = case.reference(transform=transform, model=model, tactic=Tactic(32, s_eff))
                if np.array_equal(ref.view(np.uint16), output_bits):
                    found.append((transform, model, s_eff))
    return found


def spec_deviation_counts_of_column(codes, scales, row_offsets, transform: str, row: int, column: int) -> dict:
    """How many of the weights that output element (row, column) reads deviate from the MX spec
    under the transform, by kind ({"flushed-to-zero": 128}; empty: all equal), in the kinds' order."""
    group = int(np.searchsorted(np.asarray(row_offsets), row, side="right") - 1)
    raws = np.repeat(np.asarray(scales[group, column], dtype=np.uint8), 32)
    deviations = spec_deviation_table(transform)[raws, unpack_codes(codes[group, column])]
    names = spec_deviation_names()
    counts = np.bincount(deviations.ravel(), minlength=len(names))
    return {names[d]: int(counts[d]) for d in range(1, len(names)) if counts[d]}


def activation_specials_of_row(activations, row: int) -> dict:
    """How many of row `row`'s fp16 activations (any dtype holding the bits) are NaN, Inf and
    subnormal: {"nan": 0, "inf": 1, "subnormal": 3}."""
    a = np.asarray(activations[row]).view(np.float16).astype(np.float32)
    return {"nan": int(np.count_nonzero(np.isnan(a))), "inf": int(np.count_nonzero(np.isinf(a))),
            "subnormal": int(np.count_nonzero((a != 0) & (np.abs(a) < 2.0 ** -14)))}


def spec_deviations_of_column(codes, scales, row_offsets, transform: str, row: int, column: int) -> str:
    """spec_deviation_counts_of_column in words: "128 flushed-to-zero", or "all equal"."""
    counts = spec_deviation_counts_of_column(codes, scales, row_offsets, transform, row, column)
    return ", ".join(f"{count} {name}" for name, count in counts.items()) if counts else "all equal"


def explain_element(activations, codes, scales, row_offsets, transform: str, row: int, column: int) -> str:
    """What is special in the inputs of one output element (arrays in mxdiff's layouts): the
    weights' deviations from the MX spec under the transform (so a kernel that follows the spec
    where the transform flushes or saturates shows as such), the scale bytes seen, the
    activations' specials and subnormals."""
    group = int(np.searchsorted(np.asarray(row_offsets), row, side="right") - 1)
    scale_bytes = np.asarray(scales[group, column], dtype=np.uint8)
    specials = activation_specials_of_row(activations, row)
    return (f"weights of column {column} (group {group}) vs the MX spec under {transform}: "
            f"{spec_deviations_of_column(codes, scales, row_offsets, transform, row, column)}; "
            f"scale bytes {sorted(set(scale_bytes.tolist()))}; "
            f"activations of row {row}: {specials['nan']} NaN, {specials['inf']} Inf, "
            f"{specials['subnormal']} subnormal")


def explain_spec_element(activations, codes, scales, row_offsets, row: int, column: int) -> str:
    """explain_element under mx-spec: the element's scale bytes by where the spec puts their weights
    (below fp16's range: raw <= 112, inside it, above it: raw >= 141, NaN blocks: 255) and its
    activations' specials; no SM70 deviation applies."""
    group = int(np.searchsorted(np.asarray(row_offsets), row, side="right") - 1)
    scale_bytes = np.asarray(scales[group, column], dtype=np.uint8)
    specials = activation_specials_of_row(activations, row)
    ranges = ", ".join(f"{count} {name}" for name, count in spec_scale_ranges_of_column(scales, row_offsets, row,
                                                                                         column).items())
    return (f"scale bytes of column {column} (group {group}): {sorted(set(scale_bytes.tolist()))} ({ranges}); "
            f"activations of row {row}: {specials['nan']} NaN, {specials['inf']} Inf, "
            f"{specials['subnormal']} subnormal")


_SPEC_SCALE_RANGES = ("below-fp16", "fp16-range", "above-fp16", "nan-block")
_spec_scale_range_of_raw = None  # [256] index into _SPEC_SCALE_RANGES, derived once


def _spec_scale_range_table() -> np.ndarray:
    """Where the MX spec puts each raw scale byte's weights against fp16, derived from how the
    ordinary SM70 transform departs from the spec there (reference/mx_spec.h), never typed: a byte
    it flushes is below fp16's range (raw <= 112), one it saturates or overflows above (raw >= 141,
    where 6 x 2^(raw - 127) passes 65504), the NaN byte a NaN block, the rest in range."""
    global _spec_scale_range_of_raw
    if _spec_scale_range_of_raw is None:
        names = spec_deviation_names()
        deviations = spec_deviation_table("ordinary")
        has = lambda name: (deviations == names.index(name)).any(axis=1)
        table = np.full(256, 1, np.uint8)
        table[has("flushed-to-zero")] = 0
        table[has("saturated") | has("overflow-to-inf")] = 2
        table[has("nan-dropped")] = 3
        _spec_scale_range_of_raw = table
    return _spec_scale_range_of_raw


def spec_scale_ranges_of_column(scales, row_offsets, row: int, column: int) -> dict:
    """How many scale blocks of the element's column fall in each range of _SPEC_SCALE_RANGES
    ({"below-fp16": 2, "fp16-range": 1}), in that order, the empty ones left out."""
    group = int(np.searchsorted(np.asarray(row_offsets), row, side="right") - 1)
    ranges = _spec_scale_range_table()[np.asarray(scales[group, column], dtype=np.uint8)]
    counts = np.bincount(ranges, minlength=len(_SPEC_SCALE_RANGES))
    return {name: int(counts[i]) for i, name in enumerate(_SPEC_SCALE_RANGES) if counts[i]}


def _check_settings(mode: str, transform: str, model: str) -> None:
    """ValueError unless (mode, transform, model) is a check that is defined (shared with embed.py)."""
    if mode not in ("bits", "bound"):
        raise ValueError(f"mode must be 'bits' or 'bound', not {mode!r}")
    if transform not in CHECK_TRANSFORMS:
        raise ValueError(f"transform must be one of {CHECK_TRANSFORMS}, not {transform!r}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, not {model!r}")
    if transform == MX_SPEC and mode != "bound":
        raise ValueError("transform 'mx-spec' has no bits mode: the MX spec defines each weight's value, not an "
                         "fp32 arithmetic whose bits a kernel must match, and its weights leave the range the step "
                         "models (and the exact model's accumulator) hold; use mode='bound' (docs/numerics.md)")


def bound_message(transform: str, count: int, elements: int, status: int, r: int, c: int, got_bits, exact: float,
                  low: float, high: float) -> str:
    """A bound-mode finding's first line: under mx-spec how the element departs from the spec's value
    (the element, the exact value, the bound, the kernel's value); else against the contract's bound."""
    if transform == MX_SPEC:
        # The element and its values first, 9 significant digits: fuzz_gemm keeps 120 characters.
        what = (f"spec value {float(low)!r}, which the kernel must keep" if status == 2 else
                f"spec value {float(exact):.9g}, allowed [{float(low):.9g}, {float(high):.9g}]")
        return (f"first ({r}, {c}): kernel {_f16(got_bits)}, {what}; {count} of {elements} elements off the "
                f"MX spec")
    what = ("the real sum is " + repr(float(low)) + ", which the kernel must keep" if status == 2 else
            f"allowed [{float(low)!r}, {float(high)!r}] around the exact model's {float(exact)!r}")
    return (f"{count} of {elements} elements outside the bound ({transform}); first ({r}, {c}): "
            f"kernel {_f16(got_bits)}, {what}")


def _write_finding(case: Case, kind: str, out_dir: str, transform: str, model: str, tactic: Tactic) -> tuple:
    written = case.copy()
    written.model = model
    # The case format names the SM70 transforms only: an mx-spec finding keeps the case's own
    # request (the message, not repro's reference, states the spec's value).
    if transform != MX_SPEC:
        written.request = transform
    written.cta_k = tactic.cta_k
    written.splits = tactic.splits
    data = written.encode()
    digest = hashlib.sha1(data).hexdigest()[:16]
    path = os.path.join(out_dir, f"{kind.replace('/', '.')}.{digest}.case")
    with open(path, "wb") as f:
        f.write(data)
    return path, written


class _KernelTimeout(BaseException):
    """Raised into the kernel's thread by check's watchdog (a BaseException: kernels' own
    `except Exception` does not swallow it)."""


def _call_with_timeout(kernel, inputs, timeout):
    if timeout is None:
        return kernel(*inputs)
    import ctypes
    import threading
    target = threading.get_ident()
    fired = threading.Event()

    def fire():
        fired.set()
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(_KernelTimeout))

    timer = threading.Timer(timeout, fire)
    timer.start()
    try:
        return kernel(*inputs)
    finally:
        timer.cancel()
        if fired.is_set():  # fired after the kernel returned: take back the pending exception
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)


def check(kernel: Callable, cases: Iterable, *, model: str = "sm90-emulated", transform: str = "ordinary",
          mode: str = "bits", tactic=None, out_dir: Optional[str] = None, explain: bool = True,
          timeout: Optional[float] = None) -> list:
    """Runs kernel(activations[rows, k] float16, codes[groups, n, k/2] uint8, scales[groups, n, k/32]
    uint8, row_offsets[groups + 1] int32) -> [rows, n] float16 on each case (read-only copies: a kernel
    that writes into them anyway is python/inputs-modified, and is judged against the case as it was).

    mode="bits": the output must be the reference's bits under (transform, model, tactic);
    each finding lists the (transform, model, splits) that would reproduce the kernel's bits.
    mode="bound": each element must lie within the reference's proven error bound of the exact
    model (fp16-widened), NaN must stay NaN and each Inf keep its sign.
    transform="mx-spec" (bound mode only): the contract is the OCP MX spec's element value,
    e2m1 x 2^(raw - 127) with no flush or saturation and 0xFF a NaN block; the centre is the real
    sum and an fp32 overflow some order can reach may be an infinity (docs/numerics.md).
    A kernel that raises (sys.exit() too) is python/raised.
    timeout: seconds per case; a kernel still running Python code past it is python/timeout (one
    stuck in native code cannot be interrupted from Python: run it under the fuzzer's embedded
    kernel, whose harness has its own limit).
    Returns the findings; each has a .case file in out_dir that repro explains (repro_command)."""
    _check_settings(mode, transform, model)
    t = _tactic(tactic)
    out_dir = out_dir or tempfile.mkdtemp(prefix="mxdiff-findings-")
    os.makedirs(out_dir, exist_ok=True)
    findings = []
    for case in cases:
        if isinstance(case, (str, os.PathLike)):
            case = read_case(case)
        rows, n, k = case.rows, case.n, case.k
        inputs = [case.activations, case.codes, case.scales, case.row_offsets]
        for array in inputs:
            array.flags.writeable = False
        # The kernel gets copies: the reference, the explanation and the written case read the
        # case itself, which the kernel never sees, so a kernel that changes its inputs cannot
        # change what it is judged against.
        given = _private_inputs(inputs)

        def finding(kind, message, **extra):
            path, written = _write_finding(case, kind, out_dir, transform, model, t)
            findings.append(Finding(kind, message, path, written, **extra))

        try:
            result = _call_with_timeout(kernel, given, timeout)
        except _KernelTimeout:
            finding("python/timeout", f"still running after {timeout} s", traceback=_traceback.format_exc())
            continue
        # The kernel's own failure is the finding; so is a sys.exit() in it, which would otherwise
        # end the caller's process (with status 0 for sys.exit(0)). KeyboardInterrupt still stops
        # the check: it is the user's.
        except (Exception, SystemExit) as error:
            finding("python/raised", f"{type(error).__name__}: {error}", traceback=_traceback.format_exc())
            continue
        modified = _modified_input(inputs, given)
        if modified:
            finding("python/inputs-modified", modified)
        output, problem = _kernel_output(result, rows, n)
        if output is None:
            finding("python/shape", problem)
            continue
        got = output.view(np.uint16)
        if mode == "bits":
            expected = case.reference(transform=transform, model=model, tactic=t).view(np.uint16)
            bad = np.argwhere(got != expected)
            if len(bad) == 0:
                continue
            r, c = (int(x) for x in bad[0])
            reproduced = reproducing_arithmetics(case, got) if explain else []
            message = (f"{len(bad)} of {rows * n} elements differ from the reference ({transform}, {model}, "
                       f"cta_k {t.cta_k}, splits {t.splits}); first ({r}, {c}): kernel {_f16(got[r, c])}, "
                       f"reference {_f16(expected[r, c])}; reproduced by: "
                       + (", ".join(f"{a[0]} {a[1]} splits {a[2]}" for a in reproduced) if reproduced else "none"))
            if explain:
                message += "; " + explain_element(case.activations, case.codes, case.scales, case.row_offsets,
                                                  transform, r, c)
            finding("python/bits", message, mismatches=len(bad), first=(r, c), reproduced_by=reproduced)
        else:
            status, exact, low, high = _core.bound_verdicts(
                *(_cpu_array(x, d) for x, d in zip(inputs, (np.float16, np.uint8, np.uint8, np.int32))),
                n, k, transform, got, max(1, k // 32))
            bad = np.argwhere(status != 0)
            if len(bad) == 0:
                continue
            r, c = (int(x) for x in bad[0])
            kind = "python/specials" if status[r, c] == 2 else "python/bound"
            message = bound_message(transform, len(bad), rows * n, int(status[r, c]), r, c, got[r, c],
                                    exact[r, c], low[r, c], high[r, c])
            if explain and transform == MX_SPEC:
                message += "; " + explain_spec_element(case.activations, case.codes, case.scales, case.row_offsets,
                                                       r, c)
            elif explain:
                message += "; " + explain_element(case.activations, case.codes, case.scales, case.row_offsets,
                                                  transform, r, c)
            finding(kind, message, mismatches=len(bad), first=(r, c))
    return findings
