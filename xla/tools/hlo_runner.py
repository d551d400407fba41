"""Load a program (StableHLO MLIR or HLO text), make its inputs, run it on
a platform, compare results: the library behind `run_hlo_module` and
`bench`.

Platforms (`PLATFORMS`, extend by adding a row):
  cpu          our CPU compiler (xla/service/cpu/cpu_compiler.py): compile
               once, execute natively;
  evaluator    the HLO evaluator (numpy, one instruction at a time);
  interpreter  the StableHLO reference interpreter (StableHLO input only).

A program's `@check.*` custom calls (the testdata corpus style) are run
with the corpus semantics of xla/translate/conformance_mode.py on every
platform; a failed check is recorded, never raised through compiled code.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
import threading
import zipfile
import time
from typing import Callable, Optional, Sequence

import numpy as np

import support
from xla import primitive_util
from xla.hlo.ir.hlo_opcode import HloOpcode


class PlatformUnavailable(support.UnimplementedError):
  """The platform's implementation cannot be imported or does not apply."""


@dataclasses.dataclass(frozen=True)
class ParamSpec:
  """One entry parameter: its name and HLO shape (array, tuple or token)."""
  name: str
  shape: object  # xla.shape.Shape

  def describe(self) -> str:
    return f"{self.name}: {self.shape.to_string()}"


def _is_mlir(path: str, text: str) -> bool:
  if path.endswith(".mlir"):
    return True
  if path.endswith((".hlo", ".txt")):
    return False
  head = re.sub(r"(?m)^\s*//.*$", "", text[:4096]).lstrip()
  return head.startswith(("module", "func.func", "\"builtin.module\""))


class Program:
  """A parsed and verified program read from `path`.

  `kind` is "stablehlo" or "hlo". `hlo_module()` returns a fresh HloModule
  (StableHLO is CHLO-legalized and imported first); `stablehlo_module()`
  the StableHLO module (StableHLO input only).
  """

  def __init__(self, path: str, text: str, entry: Optional[str] = None):
    self.path = path
    self.text = text
    self.entry = entry
    self.kind = "stablehlo" if _is_mlir(path, text) else "hlo"
    self.load_seconds = 0.0
    self._smodule = None
    self._hlo_text_module = None
    start = time.perf_counter()
    if self.kind == "stablehlo":
      self._smodule = self._parse_stablehlo()
      from xla.translate import stablehlo_to_hlo as s2h  # pylint: disable=g-import-not-at-top
      self.entry_name = s2h.entry_function(self._smodule, entry).attr(
          "sym_name").value
    else:
      self._hlo_text_module = self._parse_hlo()
      comp = self._hlo_text_module.entry_computation
      if comp is None:
        raise support.InvalidArgumentError(
            f"{path}: error: the HLO module has no entry computation")
      if entry is not None and entry != comp.name:
        raise support.InvalidArgumentError(
            f"{path}: error: --entry {entry}: HLO input runs its ENTRY "
            f"computation ('{comp.name}'); --entry selects a function of "
            "StableHLO input only")
      self.entry_name = comp.name
    self.load_seconds = time.perf_counter() - start

  # -- parsing ---------------------------------------------------------------

  def _parse_stablehlo(self):
    from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
    from stablehlo import verify  # pylint: disable=g-import-not-at-top
    module = mlir_text.parse_module(self.text, self.path)
    verify.verify_module(module)
    if not module.functions:
      raise support.InvalidArgumentError(
          f"{self.path}: error: the module has no function to run")
    return module

  def _parse_hlo(self):
    from xla.hlo.parser import hlo_parser  # pylint: disable=g-import-not-at-top
    from xla.service import hlo_verifier  # pylint: disable=g-import-not-at-top
    try:
      module = hlo_parser.parse_and_return_unverified_module(self.text)
    except hlo_parser.HloParseUnimplementedError as e:
      raise support.UnimplementedError(f"{self.path}:{e}") from None
    except hlo_parser.HloParseError as e:
      raise support.InvalidArgumentError(f"{self.path}:{e}") from None
    try:
      hlo_verifier.verify(module)
    except support.XlaError as e:
      raise type(e)(f"{self.path}: error: {e}") from None
    return module

  # -- views -----------------------------------------------------------------

  def stablehlo_module(self):
    if self._smodule is None:
      raise PlatformUnavailable(
          f"{self.path} is HLO text; the StableHLO interpreter runs "
          "StableHLO (.mlir) input only (use --platform=evaluator)")
    return self._smodule

  def hlo_module(self):
    """A fresh, verified HloModule for the entry."""
    if self.kind == "hlo":
      return self._hlo_text_module.clone()
    from stablehlo import text as mlir_text  # pylint: disable=g-import-not-at-top
    from stablehlo.transforms import chlo_legalize  # pylint: disable=g-import-not-at-top
    from xla.service import hlo_verifier  # pylint: disable=g-import-not-at-top
    from xla.translate import stablehlo_to_hlo as s2h  # pylint: disable=g-import-not-at-top
    # Legalization rewrites in place: work on a fresh parse.
    module = mlir_text.parse_module(self.text, self.path)
    chlo_legalize.run(module)
    try:  # quantized types -> integer arithmetic, where that pass exists
      from stablehlo.transforms import quant_legalize  # pylint: disable=g-import-not-at-top
    except ImportError:
      quant_legalize = None
    if quant_legalize is not None:
      quant_legalize.run(module)
    hlo = s2h.stablehlo_to_hlo(module, entry=self.entry)
    hlo_verifier.verify(hlo)
    return hlo

  def global_values(self, hlo) -> list[np.ndarray]:
    """Initial values of ml_program globals (extra HLO entry parameters)."""
    if self.kind != "stablehlo":
      return []
    from xla.translate import conformance_mode  # pylint: disable=g-import-not-at-top
    return conformance_mode.global_initial_values(self._smodule, hlo)

  def params(self) -> list[ParamSpec]:
    """The entry's own parameters (not the globals), in order."""
    if self.kind == "hlo":
      comp = self._hlo_text_module.entry_computation
      ps = sorted(comp.parameter_instructions,
                  key=lambda p: p.parameter_number)
      return [ParamSpec(p.name, p.shape) for p in ps]
    from xla.translate import type_conversion as tc  # pylint: disable=g-import-not-at-top
    fn = self._smodule.lookup(self.entry_name)
    block = fn.regions[0].blocks[0]
    return [ParamSpec(f"%arg{i}", tc.shape(arg.type))
            for i, arg in enumerate(block.arguments)]

  def check_count(self) -> int:
    """How many `@check.*` custom calls the program contains."""
    if self.kind == "hlo":
      return sum(1 for c in self._hlo_text_module.computations
                 for i in c.instructions
                 if i.opcode == HloOpcode.kCustomCall
                 and i.custom_call_target.startswith("check."))
    n = 0
    for top in self._smodule.body.operations:
      for op in top.walk():
        if op.name == "stablehlo.custom_call":
          target = op.attr("call_target_name")
          if getattr(target, "value", "").startswith("check."):
            n += 1
    return n


def load(path: str, entry: Optional[str] = None) -> Program:
  """Reads and parses `path`; raises XlaError subclasses on bad input."""
  try:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
      text = f.read()
  except OSError as e:
    raise support.InvalidArgumentError(
        f"error: cannot read {path}: {e.strerror}") from None
  return from_text(path, text, entry)


def from_text(path: str, text: str, entry: Optional[str] = None) -> Program:
  """Parses `text` read from `path`."""
  if not text.strip():
    raise support.InvalidArgumentError(f"{path}: error: the file is empty")
  return Program(path, text, entry)


# -- inputs -------------------------------------------------------------------


def random_value(shape, rng: np.random.Generator):
  """Floats standard normal, ints in a small range ([-5, 5] signed, [0, 10]
  unsigned), preds uniform, complex with normal parts."""
  if shape.is_tuple():
    return tuple(random_value(s, rng) for s in shape.tuple_shapes)
  if shape.is_token():
    return None
  et = shape.element_type
  dt = primitive_util.numpy_dtype(et)
  dims = tuple(shape.dimensions)
  if primitive_util.is_complex(et):
    return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)
            ).astype(dt)
  if primitive_util.is_floating_point(et):
    return rng.standard_normal(dims, dtype=np.float32).astype(dt)
  if et.name == "PRED":
    return rng.random(dims) < 0.5
  if primitive_util.is_unsigned_integral(et):
    return rng.integers(0, 11, size=dims).astype(dt)
  if primitive_util.is_signed_integral(et):
    return rng.integers(-5, 6, size=dims).astype(dt)
  raise support.UnimplementedError(
      f"cannot make a random value of type {shape}")


def random_inputs(params: Sequence[ParamSpec], seed: int) -> list:
  rng = np.random.default_rng(seed)
  return [random_value(p.shape, rng) for p in params]


def _npz_order(names: list[str]) -> list[str]:
  for pattern in (r"arg(\d+)", r"arr_(\d+)", r"param(\d+)", r"p(\d+)"):
    nums = [re.fullmatch(pattern, n) for n in names]
    if names and all(nums):
      return [n for _, n in sorted(zip((int(m.group(1)) for m in nums),
                                       names))]
  return list(names)


def npz_inputs(path: str, params: Sequence[ParamSpec]) -> list:
  """Arrays from an .npz file for `params`: keys arg0..argN (or arr_0..,
  as np.savez(*arrays) writes), else the archive's order. Float <-> float
  and int <-> int of another width are converted; anything else is an
  error."""
  if not os.path.isfile(path):
    raise support.InvalidArgumentError(
        f"{path}: error: cannot read the inputs: no such file")
  if not zipfile.is_zipfile(path):
    raise support.InvalidArgumentError(
        f"{path}: error: not an .npz file (a zip archive of .npy arrays, "
        "as numpy.savez writes)")
  try:
    with np.load(path, allow_pickle=False) as data:
      names = _npz_order(list(data.files))
      arrays = [(n, np.asarray(data[n])) for n in names]
  except OSError as e:
    raise support.InvalidArgumentError(
        f"{path}: error: cannot read the inputs: {e.strerror or e}") from None
  except (ValueError, EOFError, zipfile.BadZipFile) as e:
    raise support.InvalidArgumentError(
        f"{path}: error: cannot read the inputs: {e}") from None
  if len(arrays) != len(params):
    raise support.InvalidArgumentError(
        f"{path}: error: has {len(arrays)} arrays "
        f"({', '.join(n for n, _ in arrays) or 'none'}); the entry takes "
        f"{len(params)} parameters")
  out = []
  for i, ((name, arr), p) in enumerate(zip(arrays, params)):
    if not p.shape.is_array():
      raise support.UnimplementedError(
          f"{path}: error: parameter {i} ({p.describe()}) is not an array; "
          ".npz inputs cover array parameters only")
    want = primitive_util.numpy_dtype(p.shape.element_type)
    if arr.shape != tuple(p.shape.dimensions):
      raise support.InvalidArgumentError(
          f"{path}: error: array '{name}' has shape {arr.shape}; parameter "
          f"{i} is {p.shape.to_string()}")
    if arr.dtype != want:
      et = p.shape.element_type
      # ml_dtypes types (bf16, f8, int4) have numpy kind 'V': ask the
      # element type instead.
      same_kind = (
          primitive_util.is_floating_point(et) and arr.dtype.kind == "f"
          or primitive_util.is_integral(et) and arr.dtype.kind in "iu"
          or primitive_util.is_complex(et) and arr.dtype.kind == "c")
      if not same_kind:
        raise support.InvalidArgumentError(
            f"{path}: error: array '{name}' has dtype {arr.dtype}; "
            f"parameter {i} is {p.shape.to_string()}")
      arr = arr.astype(want)
    out.append(arr)
  return out


# -- checks -------------------------------------------------------------------


class CheckRecorder:
  """`@check.*` handlers that record failures instead of raising (compiled
  code calls them through a callback, where an exception cannot unwind)."""

  def __init__(self):
    self.failures: list[str] = []
    self.count = 0

  def handlers(self) -> dict[str, Callable]:
    from xla.translate import conformance_mode  # pylint: disable=g-import-not-at-top
    soft: list[str] = []
    inner = conformance_mode.check_handlers(soft)

    def wrap(fn):
      def handler(instr, args):
        self.count += 1
        before = len(soft)
        try:
          result = fn(instr, args)
        except AssertionError as e:
          self.failures.append(f"{_where(instr)}{e}")
          return ()
        if len(soft) > before:
          self.failures.append(f"{_where(instr)}{soft[-1]}")
        return result
      return handler

    return {name: wrap(fn) for name, fn in inner.items()}


def _where(instr) -> str:
  name = getattr(instr, "name", None)
  return f"{name}: " if name else ""


# -- platforms ----------------------------------------------------------------


@dataclasses.dataclass
class RunResult:
  outputs: list
  seconds: list[float]  # one per iteration
  check_failures: list[str]
  checks_run: int

  @property
  def best_seconds(self) -> float:
    return min(self.seconds)


class Runner:
  """A program prepared (compiled) for one platform."""
  platform = ""
  compile_seconds = 0.0
  import_seconds = 0.0
  compile_stats: Optional[dict] = None
  peak_memory_bytes: Optional[int] = None

  def run_once(self, args, recorder: CheckRecorder) -> list:
    raise NotImplementedError

  def run(self, args, iterations: int = 1) -> RunResult:
    outputs = None
    seconds = []
    recorder = CheckRecorder()
    for i in range(max(1, iterations)):
      rec = recorder if i == 0 else CheckRecorder()
      start = time.perf_counter()
      out = self.run_once(args, rec)
      seconds.append(time.perf_counter() - start)
      if outputs is None:
        outputs = out
    return RunResult(_flatten(outputs), seconds, recorder.failures,
                     recorder.count)


def _flatten(values, out=None) -> list:
  out = [] if out is None else out
  for v in values:
    if isinstance(v, (tuple, list)):
      _flatten(v, out)
    else:
      out.append(v)
  return out


class EvaluatorRunner(Runner):
  platform = "evaluator"

  def __init__(self, program: Program, options: dict):
    del options
    start = time.perf_counter()
    self.hlo = program.hlo_module()
    self.import_seconds = time.perf_counter() - start
    self.globals = program.global_values(self.hlo)

  def run_once(self, args, recorder):
    from xla.hlo.evaluator import hlo_evaluator  # pylint: disable=g-import-not-at-top
    ev = hlo_evaluator.HloEvaluator(custom_calls=recorder.handlers())
    return _drop_globals(ev.evaluate(self.hlo, list(args) + self.globals),
                         self.globals)


def _drop_globals(outputs: list, globals_: list) -> list:
  """The entry's own results: the import appends the globals' final values
  as extra outputs (the interpreter keeps them to itself)."""
  return list(outputs)[:len(outputs) - len(globals_)] if globals_ else outputs


class InterpreterRunner(Runner):
  platform = "interpreter"

  def __init__(self, program: Program, options: dict):
    self.module = program.stablehlo_module()
    self.entry = program.entry_name
    self.timeout_s = options.get("timeout_s")
    self.static_checks = program.check_count()
    fn = self.module.lookup(self.entry)
    self.arg_types = [a.type for a in fn.regions[0].blocks[0].arguments]

  def run_once(self, args, recorder):
    from stablehlo import interpreter  # pylint: disable=g-import-not-at-top
    from stablehlo.interpreter import runtime  # pylint: disable=g-import-not-at-top
    opts = interpreter.Options(timeout_s=self.timeout_s)
    interp = interpreter.Interpreter(self.module, opts)
    converted = []
    for a, ty in zip(args, self.arg_types):
      try:
        dt = runtime.numpy_dtype(ty)
      except Exception:  # pylint: disable=broad-except
        dt = None
      if dt is not None and isinstance(a, np.ndarray) and a.dtype != dt:
        a = a.astype(dt)
      converted.append(a)
    try:
      results = interp.run(self.entry, converted)
    except interpreter.CheckFailure as e:
      recorder.failures.append(str(e))
      return []
    # The interpreter runs checks itself; count the program's check ops.
    recorder.count += self.static_checks
    recorder.failures.extend(interp.soft_failures)
    return [np.asarray(r) if r is not None else r for r in results]


class CpuRunner(Runner):
  platform = "cpu"

  def __init__(self, program: Program, options: dict):
    cpu_compiler = load_cpu_compiler()
    options_cls = getattr(cpu_compiler, "CpuCompileOptions", None)
    kwargs = {k: v for k, v in options.items()
              if k in ("threads", "opt_level", "cache_dir", "dump_to")
              and v is not None}
    start = time.perf_counter()
    hlo = program.hlo_module()
    self.import_seconds = time.perf_counter() - start
    self.globals = program.global_values(hlo)
    start = time.perf_counter()
    compile_options = options_cls(**kwargs) if options_cls else None
    self.executable = cpu_compiler.compile(hlo, compile_options)
    self.compile_seconds = time.perf_counter() - start
    self.compile_stats = dict(getattr(self.executable, "compile_stats",
                                      None) or {})
    self.peak_memory_bytes = getattr(self.executable, "peak_memory_bytes",
                                     None)

  def run_once(self, args, recorder):
    return _drop_globals(self.executable.execute(
        list(args) + self.globals, custom_calls=recorder.handlers()),
                         self.globals)


def load_cpu_compiler():
  """xla.service.cpu.cpu_compiler, or PlatformUnavailable saying why."""
  try:
    # import_module consults sys.modules first, so tests can stand in a
    # fake (xla/tools/fake_cpu_compiler.py).
    cpu_compiler = importlib.import_module("xla.service.cpu.cpu_compiler")
  except ImportError as e:
    raise PlatformUnavailable(
        "platform 'cpu' is not available: the CPU compiler "
        "(xla/service/cpu/cpu_compiler.py) cannot be imported "
        f"({type(e).__name__}: {e}); use --platform=evaluator or "
        "--platform=interpreter") from None
  if not hasattr(cpu_compiler, "compile"):
    raise PlatformUnavailable(
        "platform 'cpu' is not available: xla.service.cpu.cpu_compiler has "
        "no compile()")
  return cpu_compiler


PLATFORMS: dict[str, type] = {
    "cpu": CpuRunner,
    "evaluator": EvaluatorRunner,
    "interpreter": InterpreterRunner,
}


def prepare(program: Program, platform: str, **options) -> Runner:
  """Compiles (or readies) `program` for `platform`."""
  cls = PLATFORMS.get(platform)
  if cls is None:
    raise PlatformUnavailable(
        f"unknown platform '{platform}'; known: {', '.join(PLATFORMS)}")
  return cls(program, options)


# -- comparison ---------------------------------------------------------------

# element dtype kind/name -> (rtol, atol) when none is given.
DEFAULT_TOLERANCES = {
    "float64": (1e-9, 1e-9), "complex128": (1e-9, 1e-9),
    "float32": (1e-4, 1e-4), "complex64": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2),
}
_LOW_PRECISION = (5e-1, 1e-1)  # f8 and smaller


def default_tolerance(dtype) -> tuple[float, float]:
  dtype = np.dtype(dtype)
  if dtype.kind in "iub":
    return (0.0, 0.0)
  return DEFAULT_TOLERANCES.get(dtype.name, _LOW_PRECISION)


@dataclasses.dataclass
class OutputDiff:
  index: int
  description: str  # dtype[shape]
  max_abs: float
  max_rel: float
  ok: bool
  message: str = ""  # the first mismatch, or why they cannot be compared


def describe(value) -> str:
  """`f32[2,3]`-style text for an array."""
  if value is None:
    return "token"
  v = np.asarray(value)
  try:
    name = primitive_util.lowercase_name(
        primitive_util.from_numpy_dtype(v.dtype))
  except (support.XlaError, KeyError, TypeError, ValueError):
    name = v.dtype.name
  return f"{name}[{','.join(map(str, v.shape))}]"


def compare_one(index: int, got, want, rtol: Optional[float],
                atol: Optional[float]) -> OutputDiff:
  """Elementwise |got - want| <= atol + rtol * |want|; NaN matches NaN, an
  infinity matches the same infinity; ints and preds exactly."""
  if got is None or want is None:
    ok = got is None and want is None
    return OutputDiff(index, "token", 0.0, 0.0, ok,
                      "" if ok else "token vs non-token")
  g, w = np.asarray(got), np.asarray(want)
  desc = describe(w)
  if g.shape != w.shape:
    return OutputDiff(index, desc, np.inf, np.inf, False,
                      f"shape {g.shape} vs {w.shape}")
  d_rtol, d_atol = default_tolerance(w.dtype)
  rtol = d_rtol if rtol is None else rtol
  atol = d_atol if atol is None else atol
  if g.size == 0:
    return OutputDiff(index, desc, 0.0, 0.0, True)
  kind = w.dtype.kind
  if kind in "iub" or w.dtype.name.startswith(("int", "uint")):
    gi, wi = g.astype(np.int64 if kind != "b" else np.bool_), w.astype(
        np.int64 if kind != "b" else np.bool_)
    diff = np.abs(gi.astype(np.float64) - wi.astype(np.float64))
    bad = diff > atol
    rel = diff / np.maximum(np.abs(wi.astype(np.float64)), 1.0)
  else:
    ct = np.complex128 if kind == "c" else np.float64
    gf, wf = g.astype(ct), w.astype(ct)
    both_nan = np.isnan(gf) & np.isnan(wf)
    same_inf = np.isinf(gf) & np.isinf(wf) & (gf == wf)
    with np.errstate(all="ignore"):
      diff = np.abs(gf - wf)
      diff = np.where(both_nan | same_inf, 0.0, diff)
      diff = np.where(np.isnan(diff), np.inf, diff)  # NaN vs number
      mag = np.abs(wf)
      rel = np.where(diff == 0, 0.0, diff / np.where(mag == 0, np.inf, mag))
      rel = np.where((mag == 0) & (diff > 0), np.inf, rel)
      bad = diff > atol + rtol * np.where(np.isinf(mag), 0.0, mag)
  max_abs = float(np.max(diff))
  max_rel = float(np.max(rel))
  message = ""
  if np.any(bad):
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    message = (f"{int(np.sum(bad))} of {w.size} elements differ; first at "
               f"{idx}: got {g[idx]!r}, expected {w[idx]!r}")
  return OutputDiff(index, desc, max_abs, max_rel, not np.any(bad), message)


def compare(got: Sequence, want: Sequence, rtol: Optional[float] = None,
            atol: Optional[float] = None) -> list[OutputDiff]:
  if len(got) != len(want):
    return [OutputDiff(-1, "", np.inf, np.inf, False,
                       f"{len(got)} outputs vs {len(want)}")]
  return [compare_one(i, g, w, rtol, atol)
          for i, (g, w) in enumerate(zip(got, want))]


# -- progress -----------------------------------------------------------------


class progress:  # pylint: disable=invalid-name
  """Prints `label...` to `stream` if the block takes longer than `delay`
  seconds, and `label: done in X s` when it ends."""

  def __init__(self, label: str, stream=None, delay: float = 2.0):
    self.label = label
    self.stream = stream if stream is not None else sys.stderr
    self.delay = delay
    self._printed = False
    self._timer = None
    self._start = 0.0
    self._lock = threading.Lock()

  def _announce(self):
    with self._lock:
      if self._timer is None:
        return
      self._printed = True
      try:
        self.stream.write(f"{self.label}...\n")
        self.stream.flush()
      except (OSError, ValueError):
        pass

  def __enter__(self):
    self._start = time.perf_counter()
    if self.delay is not None and self.delay >= 0 and not os.environ.get(
        "RUN_HLO_MODULE_NO_PROGRESS"):
      self._timer = threading.Timer(self.delay, self._announce)
      self._timer.daemon = True
      self._timer.start()
    return self

  def __exit__(self, *exc):
    with self._lock:
      timer, self._timer = self._timer, None
    if timer is not None:
      timer.cancel()
    if self._printed:
      try:
        self.stream.write(f"{self.label}: done in "
                          f"{time.perf_counter() - self._start:.1f} s\n")
        self.stream.flush()
      except (OSError, ValueError):
        pass
    return False
